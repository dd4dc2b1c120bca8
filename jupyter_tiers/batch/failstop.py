"""Which log lines are Slurm's reports of the fail-stop's own kills (pure).

When a rank fails, ``srun --kill-on-bad-exit`` stops every other task, and Slurm reports each
stop: ``slurmstepd: error: *** STEP 12.0 ON node3 CANCELLED AT ... ***`` per node (Slurm 25.05:
``[TS] error: *** STEP 12.0 ON node3 CANCELLED AT ... DUE TO TASK FAILURE ***``), ``srun: Job step
aborted: ...``, and per node ``srun: error: node3: tasks 24-31: Exited with exit code 143`` (or
``Terminated`` / ``Killed``). On a large job these are hundreds of lines after the failing rank's
traceback. Given the job's first failed rank (and its node), :func:`is_failstop_line` tells them
apart from the failure's own report (``srun: error: node18: task 137: Exited with exit code 7``),
so the views fold them into one line and keep that rank's traceback the last thing shown.

With the srun launcher a task is a rank; with torchrun a task is a node's agent (its number is
the node's), so the node decides first: a report from another node than the failing rank's is a
kill; from the same node, it is one only if it does not name the rank and says the task was
killed (a signal, or an exit code of 128 or more: a shell's 128 + signal, or srun's 255).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..core.model import RankState
from .logs import split_log_line

_TASKS_RE = re.compile(
    r"^srun: error: (?P<node>[\w.\-]+): tasks? (?P<tasks>\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*): "
    r"(?:Exited with exit code (?P<code>\d{1,3})|(?P<signal>Terminated|Killed))\s*$")
# slurmstepd's line per node: 22.05 ``slurmstepd-node1: error: *** STEP 78.0 ON node1 CANCELLED
# AT TS ***``; 25.05 ``[TS] error: *** STEP 32.0 ON node3 CANCELLED AT TS DUE TO TASK FAILURE ***``
# (a step cancelled for another cause, ``DUE TO TIME LIMIT`` or ``JOB REQUEUE``, is not the
# fail-stop's and stays shown, as do the ``*** JOB N ...`` lines).
_STEPD_PREFIX = r"(?:slurmstepd(?:-[\w.\-]+)?: |\[\d{4}-\d\d-\d\dT[\d:.]+\] )"
_STEP_RE = re.compile(
    r"^(?:" + _STEPD_PREFIX + r"error: \*\*\* STEP [\w.+]+ ON [\w.\-]+ CANCELLED AT \S+"
    r"(?: DUE TO TASK FAILURE)? \*\*\*\s*$"
    r"|srun: Job step aborted\b"
    r"|srun: (?:launch/slurm: _step_signal: )?(?:Force )?Terminat(?:ing|ed) (?:StepId=|job step )[\w.+]+"
    r"|srun: error: Timed out waiting for job step to complete)")
_REPORT_STARTS = ("srun: ", "slurmstepd", "[")  # "[": 25.05's slurmstepd starts with its time stamp
_TRACEBACK = "Traceback (most recent call last):"
MAX_TASK_IDS = 1 << 20  # a range wider than any job: not a task list


@dataclass(frozen=True)
class Failure:
    """The job's first failed rank and the node it ran on (None when not known)."""

    rank: int
    node: str | None = None

    def label(self, stopped: int) -> str:
        """The folded lines' summary: ``171 ranks stopped by fail-stop after rank 137 (node18) failed``."""
        where = f" ({self.node})" if self.node else ""
        noun = "rank" if stopped == 1 else "ranks"
        return f"{stopped} {noun} stopped by fail-stop after rank {self.rank}{where} failed"


def parse_task_list(text: str) -> set[int] | None:
    """srun's task list (``0-3,5,7-9``) as a set, or None when it is not one."""
    tasks: set[int] = set()
    for part in text.split(","):
        first, dash, last = part.partition("-")
        if not first.isdecimal() or (dash and not last.isdecimal()):
            return None
        lo, hi = int(first), int(last) if dash else int(first)
        if hi < lo or hi - lo > MAX_TASK_IDS or len(tasks) > MAX_TASK_IDS:
            return None
        tasks.update(range(lo, hi + 1))
    return tasks


def is_stop_report(text: str) -> bool:
    """Whether ``text`` is a Slurm report of a task or the step being stopped or ending: a line
    that :func:`is_failstop_line` may fold once the job's first failure is known."""
    if not text.startswith(_REPORT_STARTS):
        return False
    if _STEP_RE.match(text):
        return True
    m = _TASKS_RE.match(text)
    return m is not None and parse_task_list(m["tasks"]) is not None


def is_failstop_line(text: str, failure: Failure) -> bool:
    """Whether ``text`` (a line without a rank prefix) is Slurm reporting a task or the step
    stopped by the fail-stop that followed ``failure`` (see the module docstring)."""
    if not text.startswith(_REPORT_STARTS):
        return False
    if _STEP_RE.match(text):
        return True
    m = _TASKS_RE.match(text)
    if m is None:
        return False
    tasks = parse_task_list(m["tasks"])
    if tasks is None:
        return False
    if failure.node is not None and m["node"] != failure.node:
        return True
    killed = m["signal"] is not None or int(m["code"]) >= 128
    return killed and failure.rank not in tasks


@dataclass(frozen=True)
class Fold:
    """What to fold in a block of log lines: the indices of the fail-stop's lines, and of the
    failing rank's traceback starts (the fold line goes before the last one shown)."""

    lines: list[int]
    marks: list[int]


def fold_failstop(rows: Iterable[tuple[int | None, str]], failure: Failure) -> Fold:
    """Classify ``rows`` (rank or None, text) of a log block for ``failure``."""
    lines: list[int] = []
    marks: list[int] = []
    for i, (rank, text) in enumerate(rows):
        if rank is None:
            if is_failstop_line(text, failure):
                lines.append(i)
        elif rank == failure.rank and text.lstrip().startswith(_TRACEBACK):
            marks.append(i)
    return Fold(lines, marks)


def fold_text(text: str, failure: Failure) -> Fold:
    """:func:`fold_failstop` of raw log lines (``R: `` prefixes kept), one per ``\\n``."""
    parts = text.split("\n")
    if parts and parts[-1] == "":
        parts.pop()
    return fold_failstop((split_log_line(p.rstrip("\r")) for p in parts), failure)


def failure_of(first: RankState | None) -> Failure | None:
    """The :class:`Failure` of a status's ``first_failure``."""
    return None if first is None else Failure(first.rank, first.node or None)
