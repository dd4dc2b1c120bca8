"""Job history from Slurm accounting (pure: the sacct command and its parser, no I/O).

One ``sacct`` call answers a whole history query: the jobs of a user (or of everyone) that were
active in the last N days, with their steps, so a job's max RSS (sacct reports it per step) is
aggregated here. Every value that reaches the remote command is validated first: days are
bounded, the user is a plain login name, states come from a fixed list; the argv is then quoted
word by word by the transport.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from ..errors import SpecError, TiersError
from ..model import JobState
from ..plaintext import printable
from ..timefmt import format_elapsed
from .commands import BASH
from .parse import parse_elapsed

#: Fields of the history query, in order; JobName is last so a name containing the delimiter
#: stays whole.
HISTORY_FIELDS = ("JobIDRaw", "JobID", "State", "ExitCode", "Elapsed", "NNodes", "NodeList",
                  "MaxRSS", "User", "Submit", "Start", "End", "Partition", "WorkDir", "JobName")
#: Field delimiter of the query (sacct accepts a string): no job name or path we care about has it.
DELIMITER = "|#|"

MAX_DAYS = 366
DEFAULT_DAYS = 7
DEFAULT_LIMIT = 50
MAX_LIMIT = 10_000
#: ``--user all``: every user's jobs (what the cluster lets this account see).
ALL_USERS = "all"

#: States a history can be filtered by (sacct's names) and the short codes accepted for them.
STATES = ("PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT",
          "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "REQUEUED")
_STATE_CODES = {"PD": "PENDING", "R": "RUNNING", "S": "SUSPENDED", "CD": "COMPLETED",
                "CA": "CANCELLED", "F": "FAILED", "TO": "TIMEOUT", "NF": "NODE_FAIL",
                "PR": "PREEMPTED", "BF": "BOOT_FAIL", "DL": "DEADLINE", "OOM": "OUT_OF_MEMORY",
                "RQ": "REQUEUED"}

# POSIX portable user names (useradd's default rule, plus upper case some sites use).
_USER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")
_JOB_REF_RE = re.compile(r"\d{1,20}(?:_\d{1,10})?")
_RAW_ID_RE = re.compile(r"(\d{1,20})(?:\.(\S+))?")
_RSS_RE = re.compile(r"(\d{1,15}(?:\.\d{1,6})?)([KMGTP]?)", re.IGNORECASE)
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}
_NONE = {"", "Unknown", "None", "None assigned", "(null)", "N/A"}

_NO_ACCOUNTING = ("accounting storage is disabled", "Slurm accounting storage is disabled")


class AccountingDisabled(TiersError):
    """The cluster keeps no job accounting, so there is no history to ask."""


NO_ACCOUNTING_MESSAGE = (
    "no job history: Slurm accounting is off on this cluster (sacct: accounting storage is "
    "disabled); %tiers jobs still lists the jobs submitted from here")


@dataclass(frozen=True)
class HistoryQuery:
    """What to ask sacct: jobs active in the last ``days``, of ``user`` (None: the login user;
    ``"all"``: everyone the account may see), in ``states`` (empty: any)."""

    days: int = DEFAULT_DAYS
    user: str | None = None
    states: tuple[str, ...] = ()
    limit: int = DEFAULT_LIMIT
    job_id: str | None = None  # one job, whenever it ran (days, user and states then unused)


def check_days(days: Any) -> int:
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DAYS:
        raise SpecError("days", f"give a whole number of days from 1 to {MAX_DAYS}, got {days!r}"[:120])
    return days


def check_limit(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise SpecError("limit", f"give a number of jobs from 1 to {MAX_LIMIT}, got {limit!r}"[:120])
    return limit


def check_user(user: Any) -> str | None:
    """A login name (letters, digits, ``_ . -``, at most 32, not starting with ``-``), ``all``
    for every user, or None for the login user."""
    if user is None:
        return None
    if not isinstance(user, str) or not _USER_RE.fullmatch(user):
        shown = repr(user)[:40]
        raise SpecError("user", f"{shown} is not a user name (letters, digits, _ . -; at most 32; "
                        f"or {ALL_USERS!r} for every user)")
    return user


def check_states(states: Any) -> tuple[str, ...]:
    """``"failed,TO"`` or a list -> sacct state names from :data:`STATES` (sorted, unique)."""
    if states is None:
        return ()
    words: list[str] = []
    items = [states] if isinstance(states, str) else states
    if not isinstance(items, (list, tuple)):
        raise SpecError("state", f"expected state names, got {type(states).__name__}")
    for item in items:
        if not isinstance(item, str):
            raise SpecError("state", f"expected state names, got {type(item).__name__}")
        words += [w.strip() for w in item.split(",") if w.strip()]
    out = set()
    for word in words:
        name = word.upper()
        name = _STATE_CODES.get(name, name)
        if name not in STATES:
            raise SpecError("state", f"{word[:40]!r} is not a job state; use one of "
                            f"{', '.join(STATES)} (or their short codes)")
        out.add(name)
    return tuple(sorted(out))


def check_job_ref(job: Any) -> str:
    """A job id (``123``) or an array task (``123_4``)."""
    if not isinstance(job, str) or not _JOB_REF_RE.fullmatch(job):
        raise SpecError("job", f"{str(job)[:40]!r} is not a Slurm job id (123, or 123_4 for an array task)")
    return job


def make_query(days: Any = DEFAULT_DAYS, user: Any = None, states: Any = None,
               limit: Any = DEFAULT_LIMIT, job: Any = None) -> HistoryQuery:
    """A validated query (SpecError naming the bad value and what is allowed)."""
    return HistoryQuery(days=check_days(days), user=check_user(user), states=check_states(states),
                        limit=check_limit(limit), job_id=None if job is None else check_job_ref(job))


def history_argv(query: HistoryQuery) -> list[str]:
    """The one sacct command of a history query (steps included, for max RSS)."""
    if query.job_id is not None:
        return ["sacct", "-n", "-P", f"--delimiter={DELIMITER}", "-j", check_job_ref(query.job_id),
                "-o", ",".join(HISTORY_FIELDS)]
    days = check_days(query.days)
    argv = ["sacct", "-n", "-P", f"--delimiter={DELIMITER}", "-S", f"now-{days}days", "-E", "now",
            "-o", ",".join(HISTORY_FIELDS)]
    user = check_user(query.user)
    if user == ALL_USERS:
        argv.append("-a")
    elif user is not None:
        argv += ["-u", user]
    states = check_states(query.states)
    if states:
        argv += ["-s", ",".join(states)]
    return argv


@dataclass(frozen=True)
class HistoryRow:
    """One job of the history. ``ours`` is True when this registry submitted it (then
    ``key`` is its registry key); other jobs (plain ``sbatch``, another tool) are read-only."""

    job_id: str  # the raw id, what squeue/scancel/the registry use
    display_id: str  # array tasks as 12_3
    name: str
    user: str
    state: str
    exit_code: int | None
    signal: int | None
    elapsed_s: int | None
    nodes: int | None
    nodelist: str
    max_rss: int | None  # bytes: the largest task of any step
    submit: str
    start: str
    end: str
    partition: str
    workdir: str
    ours: bool = False
    key: str = ""

    @property
    def exit(self) -> str:
        if self.exit_code is None:
            return "-"
        return f"{self.exit_code}:{self.signal}" if self.signal else str(self.exit_code)

    @property
    def ref(self) -> str:
        """What scontrol and sacct take for this job: ``12_3`` for an array task, else the raw
        id (a pending array's ``12_[4-10]`` is not one job)."""
        return self.display_id if _JOB_REF_RE.fullmatch(self.display_id) else self.job_id

    @property
    def default_log(self) -> str:
        """Where sbatch writes the output when no ``--output`` was given (sacct 22.05 does not
        report the real path): ``WORKDIR/slurm-ID.out``."""
        return f"{self.workdir.rstrip('/')}/slurm-{self.display_id}.out" if self.workdir else ""

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "exit": self.exit}


def _opt(text: str) -> str:
    text = text.strip()
    return "" if text in _NONE else text


def parse_rss(text: str) -> int | None:
    """sacct's MaxRSS (``16272K``, ``1.50G``, ``0``) -> bytes."""
    m = _RSS_RE.fullmatch(text.strip())
    if not m:
        return None
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def format_bytes(value: int | None) -> str:
    """Bytes as ``512B``, ``15.9M``, ``1.5G`` (``-`` when unknown)."""
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "K", "M", "G"):
        if size < 1024:
            if unit == "B":
                return f"{int(size)}B"
            return f"{size:.1f}{unit}" if size < 100 else f"{size:.0f}{unit}"
        size /= 1024
    return f"{size:.1f}T"


def _exit(text: str) -> tuple[int | None, int | None]:
    code, _, sig = text.strip().partition(":")
    if not code.isdigit():
        return None, None
    return int(code), (int(sig) if sig.isdigit() and int(sig) else None)


def parse_history(stdout: str) -> list[HistoryRow]:
    """Rows of the history query -> one row per job (steps folded in), newest first.

    A step's row only contributes its MaxRSS; a job whose own row is missing is skipped.
    """
    jobs: dict[str, HistoryRow] = {}
    rss: dict[str, int] = {}
    order: list[str] = []
    n = len(HISTORY_FIELDS)
    for line in stdout.splitlines():
        fields = line.split(DELIMITER, n - 1)
        if len(fields) < n:
            continue
        m = _RAW_ID_RE.fullmatch(fields[0].strip())
        if not m:
            continue
        job_id, step = m.group(1), m.group(2)
        value = parse_rss(fields[7]) if fields[7].strip() else None
        if value is not None:
            rss[job_id] = max(rss.get(job_id, 0), value)
        if step is not None:
            continue
        (_, display, state, exit_code, elapsed, nnodes, nodelist, _rss, user, submit, start, end,
         partition, workdir, name) = fields
        code, sig = _exit(exit_code)
        if job_id not in jobs:
            order.append(job_id)
        jobs[job_id] = HistoryRow(
            job_id=job_id, display_id=display.strip() or job_id, name=name.rstrip("\n"),
            user=_opt(user), state=JobState.parse(state).value, exit_code=code, signal=sig,
            elapsed_s=parse_elapsed(elapsed), nodes=int(nnodes) if nnodes.strip().isdigit() else None,
            nodelist=_opt(nodelist), max_rss=None, submit=_opt(submit), start=_opt(start),
            end=_opt(end), partition=_opt(partition), workdir=_opt(workdir))
    rows = [replace(jobs[j], max_rss=rss.get(j)) for j in order]
    rows.sort(key=lambda r: (r.submit, int(r.job_id)), reverse=True)
    return rows


def history_result(exit_status: int, stdout: str, stderr: str) -> list[HistoryRow]:
    """The rows of a finished sacct call, or a one-line error: :class:`AccountingDisabled` when
    the cluster keeps no accounting, a TiersError with sacct's own words otherwise (sacct
    reports an unknown user on stderr but exits 0)."""
    if any(m in stderr for m in _NO_ACCOUNTING) or any(m in stdout for m in _NO_ACCOUNTING):
        raise AccountingDisabled(NO_ACCOUNTING_MESSAGE)
    rows = parse_history(stdout)
    errors = [ln.strip() for ln in stderr.splitlines() if "error" in ln or "fatal" in ln]
    if errors and (exit_status != 0 or not rows):
        line = errors[-1].removeprefix("sacct:").strip()
        raise TiersError(f"sacct: {line[:200]}")
    if exit_status != 0:
        raise TiersError(f"sacct exited {exit_status}: {stderr.strip()[-200:] or 'no message'}")
    return rows


def mark_ours(rows: Iterable[HistoryRow], known: dict[str, str]) -> list[HistoryRow]:
    """Mark the rows whose job id this registry knows (``known``: job id -> registry key)."""
    return [replace(r, ours=True, key=known[r.job_id]) if r.job_id in known else r for r in rows]


# A job's output, read-only: the path slurmctld still knows (scontrol's StdOut, exact, while
# it remembers the job) or else "$2" (sbatch's default); prints the path used first, then the
# file's last "$3" lines, or exits 3 if this account cannot read it.
TAIL_OUTPUT_SH = r"""p=$(scontrol -o show job "$1" 2>/dev/null |
  sed -n 's/.* StdOut=\([^ ]*\).*/\1/p' | head -n 1)
[ -n "$p" ] || p="$2"
printf '%s\n' "$p"
[ -f "$p" ] && [ -r "$p" ] || exit 3
tail -n "$3" -- "$p"
"""
_PATH_RE = re.compile(r"/[^\x00\n\r]{0,4095}")
MAX_TAIL = 100_000


def tail_output_argv(job: str, default_path: str, lines: int) -> list[str]:
    """Read-only look at a job's output: the job (``123``, ``123_4``), the path to read when
    slurmctld no longer knows the job (an absolute path from accounting), and the line count."""
    if not _PATH_RE.fullmatch(default_path or ""):
        raise SpecError("path", f"{default_path[:60]!r} is not an absolute path")
    if isinstance(lines, bool) or not isinstance(lines, int) or not 0 <= lines <= MAX_TAIL:
        raise SpecError("tail", f"give 0 to {MAX_TAIL} lines, got {lines!r}"[:100])
    return [*BASH, TAIL_OUTPUT_SH, "jt-tail-output", check_job_ref(job), default_path, str(lines)]


def parse_tail_output(exit_status: int, stdout: str) -> tuple[str, str | None]:
    """(the path read, its last lines or None when it was not readable)."""
    path, _, rest = stdout.partition("\n")
    return path, (rest if exit_status == 0 else None)


HEADER = ("ID", "NAME", "USER", "STATE", "ELAPSED", "EXIT", "NODES", "MAX RSS", "SUBMITTED", "FROM")


def format_history(rows: Sequence[HistoryRow]) -> str:
    """A fixed-width table (pure). FROM says who submitted: ``tiers`` (this registry, full
    attach) or ``other`` (plain sbatch or another tool: read-only)."""
    table = [HEADER]
    for r in rows:
        nodes = f"{r.nodes} {r.nodelist}".strip() if r.nodes else (r.nodelist or "-")
        table.append((r.display_id, _cell(r.name), r.user or "-", r.state,
                      format_elapsed(r.elapsed_s) if r.elapsed_s is not None else "-", r.exit,
                      nodes, format_bytes(r.max_rss), r.submit.replace("T", " ") or "-",
                      "tiers" if r.ours else "other"))
    widths = [max(len(row[i]) for row in table) for i in range(len(HEADER))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in table)


def _cell(text: str, width: int = 40) -> str:
    # Cluster text is shown as text: control characters would corrupt the table.
    clean = printable(text)
    return clean if len(clean) <= width else clean[: width - 1] + "…"
