"""Pure translation of JobStatus / LogLine values into the widget's synced state (no I/O)."""

from __future__ import annotations

import re
from typing import Any

from ..model import JobStatus, LogLine, RankPhase
from ..timefmt import format_elapsed

PHASE_CODES = {
    RankPhase.WAITING: "w",
    RankPhase.RUNNING: "r",
    RankPhase.EXITED: "x",
    RankPhase.FAILED: "f",
    RankPhase.STOPPED: "s",
}

# A line worth jumping to: a Python traceback header or an error report.
ERROR_RE = re.compile(
    r"Traceback \(most recent call last\)|^\w*(Error|Exception)\b|\berror:|\bFATAL\b|Segmentation fault"
)


def rank_cells(status: JobStatus) -> list[list[Any]]:
    """One compact row per rank: [phase code, node, exit code, signal]."""
    return [[PHASE_CODES[r.phase], r.node or "", r.exit_code, r.signal] for r in status.ranks]


def status_traits(status: JobStatus) -> dict[str, Any]:
    """The JobView traits that mirror a JobStatus."""
    first = status.first_failure
    return {
        "state": status.state.value,
        "reason": status.reason or "",
        "start_time": status.start_time or "",
        "elapsed": format_elapsed(status.elapsed_s) if status.elapsed_s is not None else "",
        "elapsed_s": status.elapsed_s if status.elapsed_s is not None else -1,
        "nodelist": status.nodelist or "",
        "world_size": status.world_size,
        "ranks": rank_cells(status),
        "first_failure": first.rank if first else -1,
        "message": status.message or "",
        "terminal": status.state.terminal,
    }


def line_rows(lines: list[LogLine]) -> list[list[Any]]:
    """Log lines as [rank or None, text, is_error] rows for the front end."""
    return [[ln.rank, ln.text, bool(ERROR_RE.search(ln.text))] for ln in lines]
