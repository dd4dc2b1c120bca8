"""Job history from Slurm accounting (pure: the sacct command and its parser, no I/O).

One ``sacct`` call answers a whole history query: the jobs of a user (or of everyone) that were
active in the last N days, with their steps, so a job's max RSS (sacct reports it per step) is
aggregated here. The query and its checks, the row model and the table are the scheduler-neutral
half of the history capability, :mod:`jupyter_tiers.batch.history` (re-exported here, so older imports
keep working); the argv is quoted word by word by the transport.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..batch.history import (
    ALL_USERS,
    DEFAULT_DAYS,
    DEFAULT_LIMIT,
    HEADER,
    MAX_DAYS,
    MAX_LIMIT,
    MAX_TAIL,
    NO_ACCOUNTING_MESSAGE,
    STATES,
    AccountingDisabled,
    HistoryQuery,
    HistoryRow,
    check_days,
    check_job_ref,
    check_limit,
    check_states,
    check_user,
    format_bytes,
    format_history,
    make_query,
    mark_ours,
)
from ..core.errors import SpecError, TiersError
from ..core.model import JobState
from .commands import BASH, NEUTRAL_ENV_SH, slurm_argv
from .parse import parse_elapsed, slurm_state

# This module's sacct half, and the pure half from jupyter_tiers.batch.history re-exported (older
# imports of those names from here keep working).
__all__ = [
    "ALL_USERS", "DEFAULT_DAYS", "DEFAULT_LIMIT", "DELIMITER", "HEADER", "HISTORY_FIELDS", "MAX_DAYS",
    "MAX_LIMIT", "MAX_TAIL", "NO_ACCOUNTING_MESSAGE", "STATES", "TAIL_OUTPUT_SH", "AccountingDisabled",
    "HistoryQuery", "HistoryRow", "check_days", "check_job_ref", "check_limit", "check_states",
    "check_user", "format_bytes", "format_history", "history_argv", "history_result", "make_query",
    "mark_ours", "parse_history", "parse_rss", "parse_tail_output", "tail_output_argv",
]

#: Fields of the history query, in order; JobName is last so a name containing the delimiter
#: stays whole.
HISTORY_FIELDS = ("JobIDRaw", "JobID", "State", "ExitCode", "Elapsed", "NNodes", "NodeList",
                  "MaxRSS", "User", "Submit", "Start", "End", "Partition", "WorkDir", "JobName")
#: Field delimiter of the query (sacct accepts a string): no job name or path we care about has it.
DELIMITER = "|#|"

_RAW_ID_RE = re.compile(r"(\d{1,20})(?:\.(\S+))?")
_RSS_RE = re.compile(r"(\d{1,15}(?:\.\d{1,6})?)([KMGTP]?)", re.IGNORECASE)
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}
_NONE = {"", "Unknown", "None", "None assigned", "(null)", "N/A"}

_NO_ACCOUNTING = ("accounting storage is disabled", "Slurm accounting storage is disabled")
# sacct's words when slurmdbd (or its database) does not answer: accounting is on but down.
ACCOUNTING_DOWN = ("Problem talking to the database", "Unable to connect to database",
                    "slurmdbd: Connection refused")


def history_argv(query: HistoryQuery) -> list[str]:
    """The one sacct command of a history query (steps included, for max RSS)."""
    if query.job_id is not None:
        return slurm_argv("sacct", "-n", "-P", f"--delimiter={DELIMITER}", "-j",
                          check_job_ref(query.job_id), "-o", ",".join(HISTORY_FIELDS))
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
    return slurm_argv(*argv)


def _opt(text: str) -> str:
    text = text.strip()
    return "" if text in _NONE else text


def parse_rss(text: str) -> int | None:
    """sacct's MaxRSS (``16272K``, ``1.50G``, ``0``) -> bytes."""
    m = _RSS_RE.fullmatch(text.strip())
    if not m:
        return None
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def _exit(text: str) -> tuple[int | None, int | None]:
    code, _, sig = text.strip().partition(":")
    if not code.isdigit():
        return None, None
    return int(code), (int(sig) if sig.isdigit() and int(sig) else None)


def parse_history(stdout: str) -> list[HistoryRow]:
    """Rows of the history query -> one row per job (steps folded in), newest first.

    A step's row only contributes its MaxRSS and, when it failed with an exit of its own, the
    row's ``failure``; a job whose own row is missing is skipped.
    """
    jobs: dict[str, HistoryRow] = {}
    rss: dict[str, int] = {}
    steps: dict[str, tuple[str, int]] = {}  # job id -> its first failed numbered step and exit
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
            code, _sig = _exit(fields[3])
            failed = slurm_state(fields[2])[0] is JobState.FAILED
            if step.isdigit() and failed and code and job_id not in steps:
                steps[job_id] = (step, code)
            continue
        (_, display, state, exit_code, elapsed, nnodes, nodelist, _rss, user, submit, start, end,
         partition, workdir, name) = fields
        code, sig = _exit(exit_code)
        category, word = slurm_state(state)
        if job_id not in jobs:
            order.append(job_id)
        jobs[job_id] = HistoryRow(
            job_id=job_id, display_id=display.strip() or job_id, name=name.rstrip("\n"),
            user=_opt(user), state=word or category.value, exit_code=code, signal=sig,
            elapsed_s=parse_elapsed(elapsed), nodes=int(nnodes) if nnodes.strip().isdigit() else None,
            nodelist=_opt(nodelist), max_rss=None, submit=_opt(submit), start=_opt(start),
            end=_opt(end), partition=_opt(partition), workdir=_opt(workdir))
    rows = [replace(jobs[j], max_rss=rss.get(j), failure=_step_failure(jobs[j], steps.get(j)))
            for j in order]
    rows.sort(key=lambda r: (r.submit, int(r.job_id)), reverse=True)
    return rows


def _step_failure(row: HistoryRow, step: tuple[str, int] | None) -> str:
    """``step 0 exit 1`` for a failed job whose failed step exited otherwise than the job (whose
    ExitCode is its batch script's), else ""."""
    if step is None or row.state != "FAILED" or step[1] == row.exit_code:
        return ""
    return f"step {step[0]} exit {step[1]}"


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
        if any(m in line for m in ACCOUNTING_DOWN):
            raise TiersError(f"Slurm accounting (slurmdbd) does not answer, so there is no history "
                             f"now; try again later (%tiers jobs still works) — sacct: {line[:160]}")
        raise TiersError(f"sacct: {line[:200]}")
    if exit_status != 0:
        raise TiersError(f"sacct exited {exit_status}: {stderr.strip()[-200:] or 'no message'}")
    return rows


# A job's output, read-only: the path slurmctld still knows (scontrol's StdOut, exact, while
# it remembers the job) or else "$2" (sbatch's default); prints the path used first, then the
# file's last "$3" lines, or exits 3 if this account cannot read it.
TAIL_OUTPUT_SH = NEUTRAL_ENV_SH + r"""p=$(scontrol -o show job "$1" 2>/dev/null |
  sed -n 's/.* StdOut=\([^ ]*\).*/\1/p' | head -n 1)
[ -n "$p" ] || p="$2"
printf '%s\n' "$p"
[ -f "$p" ] && [ -r "$p" ] || exit 3
tail -n "$3" -- "$p"
"""
_PATH_RE = re.compile(r"/[^\x00\n\r]{0,4095}")


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
