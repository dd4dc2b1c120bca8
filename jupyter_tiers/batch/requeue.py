"""Requeued jobs (preempted, node failure, ``scontrol requeue``): one job, several runs (pure).

Slurm starts a requeued batch job again from the top, with ``SLURM_RESTART_COUNT`` set (1 on the
first restart). The job keeps its id, its job directory and its log (``--open-mode=append``), so
the notebook keeps one widget and one handle. At the start of each restart the batch script
(``restart_lines``) writes a marker line ``— restart N —`` into the log, after the output of the
runs before, and a ``requeue N TS`` event into every rank file, so the rank grid shows the new
run's ranks as waiting until they start again. The rank shim records each start with the run's
number (``start TS NODE N``) and exports ``JT_RESTART_COUNT`` to the program.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from ..core.model import JobState, RankState, SchedulerInfo

_MARKER = "— restart {} —"
_MARKER_RE = re.compile(r"— restart (\d{1,6}) —")

# States the scheduler shows between a job's runs: after these, PENDING means "requeued".
RAN_STATES = frozenset({JobState.RUNNING, JobState.COMPLETING, JobState.SUSPENDED,
                        JobState.CONFIGURING})
BETWEEN_RUNS = frozenset({JobState.PENDING, JobState.REQUEUED, JobState.PREEMPTED})


def restart_marker(n: int) -> str:
    """The log line that opens run ``n`` (1 for the first restart)."""
    return _MARKER.format(int(n))


def marker_restart(text: str) -> int | None:
    """The restart number of a marker line (a line no rank wrote), else None."""
    m = _MARKER_RE.fullmatch(text.strip())
    return int(m.group(1)) if m else None


def restart_lines(log_name: str) -> list[str]:
    """Batch-script lines (run at the top of every run) that mark a restart."""
    return [
        "# A requeued job starts again here (SLURM_RESTART_COUNT=N): mark the restart in the log",
        "# (kept across runs: --open-mode=append) and in the rank files, for the notebook.",
        'export JT_RESTART_COUNT="${SLURM_RESTART_COUNT:-0}"',
        'if [ "$JT_RESTART_COUNT" -gt 0 ] 2>/dev/null; then',
        f'  if [ -n "$(tail -c 1 -- "$JT_JOB_DIR/{log_name}" 2>/dev/null)" ]; then echo; fi',
        f"  printf '{_MARKER.format('%s')}\\n' \"$JT_RESTART_COUNT\"",
        '  for f in "$JT_JOB_DIR"/ranks/*; do',
        '    [ -f "$f" ] && printf \'requeue %s %s\\n\' "$JT_RESTART_COUNT" "$(date +%s.%N)" >> "$f"',
        "  done",
        "fi",
    ]


def restart_count(ranks: Iterable[RankState], previous: int = 0) -> int:
    """How many times the job has restarted, from its rank files (and what was known before)."""
    return max([previous, *(r.attempt for r in ranks)])


def summary_restarts(n: int) -> str:
    """``" after 1 restart"`` for the summary line ("" when it never restarted)."""
    if n <= 0:
        return ""
    return f" after {n} restart{'s' if n != 1 else ''}"


def requeue_pending(found: dict[str, SchedulerInfo], requeue_ids: Iterable[str]) -> dict[str, SchedulerInfo]:
    """squeue's rows with PREEMPTED read as REQUEUED for ``--requeue`` jobs: while the queue still
    lists such a job it is on its way back (PREEMPTED is final for a job that cannot be
    requeued, and accounting keeps saying so once the queue has forgotten it)."""
    ids = set(requeue_ids)
    return {i: (replace(info, state=JobState.REQUEUED)
                if i in ids and info.state is JobState.PREEMPTED else info)
            for i, info in found.items()}
