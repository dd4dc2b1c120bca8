"""Pure parsers of Slurm command output and of the rank shim's files. No I/O here."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from ..core.errors import SubmitError
from ..core.model import JobState, SchedulerInfo

# Field order of the squeue and sacct queries built in slurm/commands.py.
SQUEUE_FORMAT = "%i|%T|%r|%S|%M|%N|%j|%D"
SACCT_FIELDS = "JobIDRaw,State,ExitCode,Elapsed,NodeList,Reason,Start,End,JobName"
SINFO_NODES_FORMAT = "%N|%T|%E"

# sbatch's answer: "--parsable" prints "ID" or "ID;CLUSTER"; without it (or from a wrapper that
# drops it), "Submitted batch job ID" with " on cluster CLUSTER" on multi-cluster sites.
_JOBID_RE = re.compile(r"(\d{1,20})(?:;[A-Za-z0-9_.-]{1,200})?"
                       r"|Submitted batch job (\d{1,20})(?: on cluster [A-Za-z0-9_.-]{1,200})?", re.ASCII)
# A job, an array task ("51_3", squeue -r), or a heterogeneous job's component ("51+0").
_ROW_ID_RE = re.compile(r"\d{1,20}(?:_\d{1,10}|\+\d{1,5})?", re.ASCII)
_RANK_LINE_RE = re.compile(r"^(\d{1,7}): ?(.*)$", re.DOTALL)
_NONE_WORDS = {"", "(null)", "None", "N/A", "n/a", "Unknown"}


def parse_sbatch_parsable(stdout: str) -> str:
    """The job id from sbatch's answer, strictly: ``123`` or ``123;cluster`` (``--parsable``),
    or ``Submitted batch job 123`` (`` on cluster X``)."""
    lines = [ln.strip() for ln in stdout.strip().splitlines() if ln.strip()]
    if not lines:
        raise SubmitError("sbatch printed no job id")
    match = _JOBID_RE.fullmatch(lines[0])
    if not match:
        raise SubmitError(f"sbatch printed no job id, but: {lines[0][:200]!r}")
    return match.group(1) or match.group(2)


def slurm_state(text: str) -> tuple[JobState, str | None]:
    """Slurm's state word -> (the JobState it counts as, the word itself when that is not the
    JobState's own name). ``CANCELLED by 1000`` -> (CANCELLED, None); ``RESV_DEL_HOLD`` ->
    (PENDING, "RESV_DEL_HOLD"); a word no release had when this was written -> (UNKNOWN, word),
    so the user sees what Slurm said, never a wrong state and never a crash."""
    state = JobState.parse(text)
    word = text.strip().split(" ")[0].rstrip("+").upper() if text.strip() else ""
    word = _LONG_NAMES.get(word, word)
    if not word or word == state.value or _SHORT_NAMES.get(word) == state.value:
        return state, None
    return state, printable_word(word)


# Slurm's two-letter codes of the states that have a member of their own (squeue %t).
_SHORT_NAMES = {"PD": "PENDING", "CF": "CONFIGURING", "R": "RUNNING", "CG": "COMPLETING",
                "S": "SUSPENDED", "RQ": "REQUEUED", "CD": "COMPLETED", "F": "FAILED",
                "CA": "CANCELLED", "TO": "TIMEOUT", "NF": "NODE_FAIL", "PR": "PREEMPTED",
                "OOM": "OUT_OF_MEMORY", "BF": "BOOT_FAIL", "DL": "DEADLINE"}


# ... and of the states read as another member (model._SHORT_CODES): shown by their long name.
_LONG_NAMES = {"RD": "RESV_DEL_HOLD", "RH": "REQUEUE_HOLD", "RF": "REQUEUE_FED", "SE": "SPECIAL_EXIT",
               "RS": "RESIZING", "SO": "STAGE_OUT", "ST": "STOPPED", "RV": "REVOKED", "SI": "SIGNALING"}


def printable_word(word: str) -> str:
    """A state word as shown: letters, digits and ``_`` only, at most 40 (text from the cluster)."""
    return re.sub(r"[^A-Z0-9_]", "?", word[:40])


def _with_state(note: str | None, reason: str | None) -> str | None:
    """The reason shown for a state that is not a JobState's own name: ``RESV_DEL_HOLD`` first."""
    if note is None:
        return reason
    return f"{note}: {reason}" if reason else note


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
        job_id = job_id.strip()
        if not _ROW_ID_RE.fullmatch(job_id):
            continue
        st, note = slurm_state(state)
        out[job_id] = SchedulerInfo(
            job_id=job_id,
            state=st,
            reason=_with_state(note, _opt(reason)),
            nodelist=_opt(nodes),
            start_time=_opt(start),
            elapsed_s=parse_elapsed(elapsed),
            name=_opt(name),
        )
    return _het_leaders(out)


def _het_leaders(out: dict[str, SchedulerInfo]) -> dict[str, SchedulerInfo]:
    """A heterogeneous job is listed as its components ``N+0``, ``N+1``...; its leader ``N+0``
    also answers for ``N``, the id sbatch gave."""
    for key, info in list(out.items()):
        base, plus, offset = key.partition("+")
        if plus and offset == "0" and base not in out:
            out[base] = replace(info, job_id=base)
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
        st, note = slurm_state(state)
        out[job_id.strip()] = SchedulerInfo(
            job_id=job_id.strip(),
            state=st,
            reason=_with_state(note, _opt(reason)),
            nodelist=_opt(nodes) if _opt(nodes) != "None assigned" else None,
            start_time=_opt(start),
            end_time=_opt(end),
            elapsed_s=parse_elapsed(elapsed),
            exit_code=code,
            exit_signal=sig,
            name=_opt(name),
        )
    return _het_leaders(out)


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
        st, note = slurm_state(pairs.get("JobState", ""))
        out[job_id] = SchedulerInfo(
            job_id=job_id,
            state=st,
            reason=_with_state(note, _opt(pairs.get("Reason", ""))),
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


def _hostlist_parts(text: str) -> list[str]:
    """The comma-separated names of a hostlist, a bracket's commas kept (``node[1-3,7]``): what
    ``re.findall(r"[^,\\[]+(?:\\[[^\\]]*\\])?[^,]*", text)`` finds, in one pass. That pattern
    searched to the end of the text for the ``]`` of every unclosed ``[`` (quadratic in them); here
    a ``[`` after the last ``]`` is known unclosed at once."""
    parts: list[str] = []
    last_close = text.rfind("]")
    pos, n = 0, len(text)
    while pos < n:
        if text[pos] in ",[":  # no name starts here
            pos += 1
            continue
        end = pos
        while end < n and text[end] not in ",[":
            end += 1
        if end < n and text[end] == "[" and end < last_close:
            end = text.index("]", end) + 1
        comma = text.find(",", end)
        end = n if comma < 0 else comma
        parts.append(text[pos:end])
        pos = end
    return parts


def expand_hostlist(text: str) -> list[str]:
    """Slurm hostlist syntax -> names: ``node[1-3,7],gpu01`` -> node1 node2 node3 node7 gpu01."""
    names: list[str] = []
    for part in _hostlist_parts(text or ""):
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
