"""Pure parsers of Slurm command output and of the rank shim's files. No I/O here."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..errors import SubmitError
from ..model import JobState, LogLine, RankPhase, RankState, SchedulerInfo

# Field order of the squeue and sacct queries built in slurm/commands.py.
SQUEUE_FORMAT = "%i|%T|%r|%S|%M|%N|%j|%D"
SACCT_FIELDS = "JobIDRaw,State,ExitCode,Elapsed,NodeList,Reason,Start,End,JobName"

_JOBID_RE = re.compile(r"^(\d+)(?:;[A-Za-z0-9_.-]+)?$")
_RANK_LINE_RE = re.compile(r"^(\d{1,7}): ?(.*)$", re.DOTALL)
_NONE_WORDS = {"", "(null)", "None", "N/A", "n/a", "Unknown"}


def parse_sbatch_parsable(stdout: str) -> str:
    """The job id from ``sbatch --parsable`` output ("123" or "123;cluster"), strictly."""
    lines = [ln.strip() for ln in stdout.strip().splitlines() if ln.strip()]
    if not lines:
        raise SubmitError("sbatch printed no job id")
    match = _JOBID_RE.match(lines[0])
    if not match:
        raise SubmitError(f"sbatch printed no job id, but: {lines[0][:200]!r}")
    return match.group(1)


def parse_elapsed(text: str) -> int | None:
    """Slurm durations ("1-02:03:04", "02:03:04", "3:04", "0:00") -> seconds."""
    text = text.strip()
    if text in _NONE_WORDS or text in ("INVALID", "UNLIMITED"):
        return None
    days = 0
    if "-" in text:
        d, _, text = text.partition("-")
        if not d.isdigit():
            return None
        days = int(d)
    parts = text.split(":")
    if not all(p.isdigit() for p in parts) or not 1 <= len(parts) <= 3:
        return None
    nums = [int(p) for p in parts]
    while len(nums) < 3:
        nums.insert(0, 0)
    h, m, s = nums
    return ((days * 24 + h) * 60 + m) * 60 + s


def format_elapsed(seconds: int | float | None) -> str:
    """Seconds -> "HH:MM:SS" (with "D-" when a day or more)."""
    if seconds is None:
        return "--:--:--"
    total = max(0, int(seconds))
    days, rest = divmod(total, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    clock = f"{h:02d}:{m:02d}:{s:02d}"
    return f"{days}-{clock}" if days else clock


def _opt(text: str) -> str | None:
    text = text.strip()
    return None if text in _NONE_WORDS else text


def _exit_code(text: str) -> tuple[int | None, int | None]:
    """sacct/scontrol "code:signal" -> (code, signal)."""
    code, _, sig = text.strip().partition(":")
    if not code.isdigit():
        return None, None
    return int(code), (int(sig) if sig.isdigit() else None)


def parse_squeue(stdout: str) -> dict[str, SchedulerInfo]:
    """Rows of ``squeue -h -o SQUEUE_FORMAT`` -> job id -> info."""
    out: dict[str, SchedulerInfo] = {}
    for line in stdout.splitlines():
        fields = line.split("|")
        if len(fields) < 8:
            continue
        job_id, state, reason, start, elapsed, nodes, name, _count = fields[:8]
        if not job_id.strip().isdigit():
            continue
        st = JobState.parse(state)
        out[job_id.strip()] = SchedulerInfo(
            job_id=job_id.strip(),
            state=st,
            reason=_opt(reason),
            nodelist=_opt(nodes),
            start_time=_opt(start),
            elapsed_s=parse_elapsed(elapsed),
            name=_opt(name),
        )
    return out


def parse_sacct(stdout: str) -> dict[str, SchedulerInfo]:
    """Rows of ``sacct -X -n -P -o SACCT_FIELDS`` -> job id -> info (last row wins on requeue)."""
    out: dict[str, SchedulerInfo] = {}
    for line in stdout.splitlines():
        fields = line.split("|")
        if len(fields) < 9:
            continue
        job_id, state, exit_code, elapsed, nodes, reason, start, end, name = fields[:9]
        if not job_id.strip().isdigit():
            continue
        code, sig = _exit_code(exit_code)
        out[job_id.strip()] = SchedulerInfo(
            job_id=job_id.strip(),
            state=JobState.parse(state),
            reason=_opt(reason),
            nodelist=_opt(nodes) if _opt(nodes) != "None assigned" else None,
            start_time=_opt(start),
            end_time=_opt(end),
            elapsed_s=parse_elapsed(elapsed),
            exit_code=code,
            exit_signal=sig,
            name=_opt(name),
        )
    return out


def parse_scontrol_jobs(stdout: str) -> dict[str, SchedulerInfo]:
    """``scontrol -o show job`` (one job per line of key=value pairs) -> job id -> info."""
    out: dict[str, SchedulerInfo] = {}
    for line in stdout.splitlines():
        pairs = dict(_kv_pairs(line))
        job_id = pairs.get("JobId", "")
        if not job_id.isdigit():
            continue
        code, sig = _exit_code(pairs.get("ExitCode", ""))
        out[job_id] = SchedulerInfo(
            job_id=job_id,
            state=JobState.parse(pairs.get("JobState", "")),
            reason=_opt(pairs.get("Reason", "")),
            nodelist=_opt(pairs.get("NodeList", "")),
            start_time=_opt(pairs.get("StartTime", "")),
            end_time=_opt(pairs.get("EndTime", "")),
            elapsed_s=parse_elapsed(pairs.get("RunTime", "")),
            exit_code=code,
            exit_signal=sig,
            name=_opt(pairs.get("JobName", "")),
        )
    return out


def _kv_pairs(line: str) -> Iterable[tuple[str, str]]:
    # Values may contain spaces (e.g. Reason=... or Command=...), so split on " Key=" boundaries.
    for match in re.finditer(r"(?:^|\s)([A-Za-z:/]+)=(\S*(?:\s(?![A-Za-z:/]+=)\S*)*)", line):
        yield match.group(1), match.group(2)


def parse_rank_files(text: str) -> dict[str, dict[int, RankState]]:
    """Output of the rank-state query -> job dir -> rank -> state.

    The query prints, per job directory, a line ``@@ DIR``, then ``grep -H`` lines
    ``DIR/ranks/R:EVENT ...`` and ``find -printf`` lines ``% R MTIME`` for heartbeats.
    Events: ``start TS NODE``, ``exit CODE TS``, ``signal SIG TS`` (stopped from outside),
    ``killed SIG TS`` (died of its own signal). A rank restarted by a requeue
    starts again, so a later ``start`` clears an earlier end.
    """
    result: dict[str, dict[int, RankState]] = {}
    current: dict[int, RankState] | None = None
    for line in text.splitlines():
        if line.startswith("@@ "):
            current = result.setdefault(line[3:], {})
            continue
        if current is None:
            continue
        if line.startswith("% "):
            parts = line.split()
            if len(parts) == 3 and parts[1].isdigit():
                rank = int(parts[1])
                prev = current.get(rank, RankState(rank=rank))
                current[rank] = _replace(prev, heartbeat_at=_float(parts[2]))
            continue
        path, sep, event = line.partition(":")
        if not sep:
            continue
        rank_text = path.rsplit("/", 1)[-1]
        if not rank_text.isdigit():
            continue
        rank = int(rank_text)
        current[rank] = _apply_event(current.get(rank, RankState(rank=rank)), event.split())
    return result


def parse_rank_file(rank: int, text: str, heartbeat_at: float | None = None) -> RankState:
    """One rank file's text (the shim's ``start``/``exit``/``signal`` lines) -> that rank's state.

    For readers of the job directory itself (the local tier); same rules as parse_rank_files.
    """
    state = RankState(rank=rank, heartbeat_at=heartbeat_at)
    for line in text.splitlines():
        state = _apply_event(state, line.split())
    return state


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _replace(state: RankState, **changes: object) -> RankState:
    from dataclasses import replace

    return replace(state, **changes)  # type: ignore[arg-type]


def _apply_event(state: RankState, words: list[str]) -> RankState:
    if not words:
        return state
    kind = words[0]
    if kind == "start" and len(words) >= 2:
        return _replace(
            state,
            phase=RankPhase.RUNNING,
            started_at=_float(words[1]),
            node=words[2] if len(words) > 2 else state.node,
            exit_code=None,
            signal=None,
            ended_at=None,
        )
    if kind == "exit" and len(words) >= 3 and words[1].lstrip("-").isdigit():
        code = int(words[1])
        return _replace(
            state,
            phase=RankPhase.EXITED if code == 0 else RankPhase.FAILED,
            exit_code=code,
            ended_at=_float(words[2]),
        )
    if kind in ("signal", "killed") and len(words) >= 3 and words[1].isdigit():
        # "signal": stopped from outside (fail-stop, cancel, time limit); "killed": died of its
        # own signal (abort, segfault, out of memory), which makes it a failure.
        return _replace(
            state,
            phase=RankPhase.STOPPED if kind == "signal" else RankPhase.FAILED,
            signal=int(words[1]),
            ended_at=_float(words[2]),
        )
    return state


def split_log_line(line: str) -> tuple[int | None, str]:
    """A merged-log line -> (rank or None, text without the ``"R: "`` prefix)."""
    match = _RANK_LINE_RE.match(line)
    if match:
        return int(match.group(1)), match.group(2)
    return None, line


class LogDecoder:
    """Turns a byte stream of the merged log into LogLines, tracking the exact byte offset.

    Bytes after the last newline are held until their line is complete, so resuming the stream at
    :attr:`offset` after a dropped connection neither loses nor repeats a line.
    """

    def __init__(self, offset: int = 0, *, skip_partial: bool = False) -> None:
        self.offset = offset  # bytes consumed into complete lines
        self._pending = b""
        # Starting mid-file (to show only a log's tail): drop the rest of the line we landed in.
        self._skipping = skip_partial and offset > 0

    @property
    def received(self) -> int:
        """Bytes received so far, including an incomplete last line."""
        return self.offset + len(self._pending)

    def feed(self, chunk: bytes) -> list[LogLine]:
        if self._skipping:
            cut = chunk.find(b"\n") + 1
            if not cut:
                self.offset += len(chunk)
                return []
            self.offset += cut
            chunk = chunk[cut:]
            self._skipping = False
        data = self._pending + chunk if self._pending else chunk
        cut = data.rfind(b"\n") + 1
        if not cut:
            self._pending = data
            return []
        self._pending = data[cut:]
        block = data[:cut] if cut < len(data) else data
        # One decode and split for the whole block (a fast log brings thousands of lines per
        # chunk). Same text as decoding line by line: a newline byte is never part of a UTF-8
        # sequence, valid or not. Offsets count bytes, which in ASCII are the characters.
        texts = block.decode("utf-8", errors="replace").split("\n")
        texts.pop()
        if block.isascii():
            sizes = [len(t) + 1 for t in texts]
        else:
            raws = block.split(b"\n")
            raws.pop()
            sizes = [len(raw) + 1 for raw in raws]
        offset = self.offset
        lines: list[LogLine] = []
        append = lines.append
        match = _RANK_LINE_RE.match
        for text, size in zip(texts, sizes, strict=True):
            offset += size
            if text[-1:] == "\r":
                text = text.rstrip("\r")
            # Fast path for the shim's "R: " prefix (half the cost of the regex), which still
            # decides every other shape so the result equals split_log_line's.
            head, sep, rest = text.partition(": ")
            if sep and len(head) <= 7 and head.isdecimal():
                append(LogLine(rest, int(head), offset))
                continue
            m = match(text)
            # LogLine(text, rank, end_offset), positionally: keywords cost ~10% of this loop.
            if m:
                append(LogLine(m.group(2), int(m.group(1)), offset))
            else:
                append(LogLine(text, None, offset))
        self.offset = offset
        return lines

    def flush(self) -> list[LogLine]:
        """Emit a final line that has no newline (call only when the log is complete)."""
        if not self._pending:
            return []
        raw, self._pending = self._pending, b""
        self.offset += len(raw)
        rank, text = split_log_line(raw.decode("utf-8", errors="replace").rstrip("\r"))
        return [LogLine(text=text, rank=rank, end_offset=self.offset)]


def expand_hostlist(text: str) -> list[str]:
    """Slurm hostlist syntax -> names: ``node[1-3,7],gpu01`` -> node1 node2 node3 node7 gpu01."""
    names: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", text or ""):
        match = re.match(r"^([^\[]*)\[([^\]]*)\](.*)$", part)
        if not match:
            names.append(part)
            continue
        prefix, ranges, suffix = match.groups()
        for rng in ranges.split(","):
            lo, _, hi = rng.partition("-")
            if not hi:
                names.append(f"{prefix}{lo}{suffix}")
                continue
            width = len(lo) if lo.startswith("0") else 0
            names += [f"{prefix}{i:0{width}d}{suffix}" for i in range(int(lo), int(hi) + 1)]
    return names
