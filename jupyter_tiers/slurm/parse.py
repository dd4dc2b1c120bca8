"""Pure parsers of Slurm command output and of the rank shim's files. No I/O here."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..errors import SubmitError
from ..model import JobState, SchedulerInfo

# Field order of the squeue and sacct queries built in slurm/commands.py.
SQUEUE_FORMAT = "%i|%T|%r|%S|%M|%N|%j|%D"
SACCT_FIELDS = "JobIDRaw,State,ExitCode,Elapsed,NodeList,Reason,Start,End,JobName"
SINFO_NODES_FORMAT = "%N|%T|%E"

_JOBID_RE = re.compile(r"^(\d+)(?:;[A-Za-z0-9_.-]+)?$")
_ROW_ID_RE = re.compile(r"\d+(?:_\d+)?", re.ASCII)  # a job, or an array task ("51_3", squeue -r)
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
        if not _ROW_ID_RE.fullmatch(job_id.strip()):
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
        if not _ROW_ID_RE.fullmatch(job_id.strip()):
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
        array_id, task = pairs.get("ArrayJobId", ""), pairs.get("ArrayTaskId", "")
        if array_id.isdigit() and task.isdigit():
            job_id = f"{array_id}_{task}"  # an array task is known by its array's name for it
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


# sinfo's %T of a node that is out of service; a trailing "*" means it does not respond.
_OUT_OF_SERVICE = ("down", "drain", "drained", "draining", "fail", "failing")


def parse_failed_nodes(stdout: str) -> dict[str, str]:
    """``sinfo -h -N -o %N|%T|%E`` -> {node: why} for the nodes out of service or not
    responding: ``down: Not responding``, ``not responding``. Other nodes and malformed rows are
    left out; a node listed once per partition is named once."""
    failed: dict[str, str] = {}
    for line in stdout.splitlines():
        parts = line.strip().split("|", 2)
        if len(parts) != 3 or not re.fullmatch(r"[A-Za-z0-9_.-]{1,200}", parts[0]):
            continue
        node, state, why = parts[0], parts[1].strip().lower(), parts[2].strip()
        silent = state.endswith("*")
        state = state.rstrip("*~#!%$@^-")
        if state in _OUT_OF_SERVICE:
            text = state + (", not responding" if silent else "")
            failed.setdefault(node, f"{text}: {why[:200]}" if why and why not in _NONE_WORDS else text)
        elif silent:
            failed.setdefault(node, "not responding")
    return failed
