"""Pure translation of JobStatus / LogLine values into the widget's synced state (no I/O)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

from ...batch.endreason import LogTail
from ...batch.failstop import Failure, failure_of, fold_text
from ...batch.logs import LogBatch, split_log_line
from ...batch.pending import explained_reason
from ...batch.usage import node_totals, usage_cell
from ...core.errors import TiersError
from ...core.model import JobStatus, RankPhase
from ...core.plaintext import strip_ansi
from ...core.record import JobRecord
from ...core.timefmt import format_elapsed

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
# The same test over many raw lines at once ("R: " prefixes kept; ^ is each line's text start).
_BULK_ERROR_RE = re.compile(
    r"Traceback \(most recent call last\)|^(?:\d{1,7}: ?)?\w*(?:Error|Exception)\b|\berror:"
    r"|\bFATAL\b|Segmentation fault",
    re.MULTILINE,
)


def rank_cells(status: JobStatus) -> list[list[Any]]:
    """One compact row per rank: [phase code, node, exit code, signal, usage], usage the latest
    sample as [cpu %, RSS MiB, GPU util %, GPU MiB] (None where unknown; usage.usage_cell)."""
    return [[PHASE_CODES[r.phase], r.node or "", r.exit_code, r.signal, usage_cell(r.usage)]
            for r in status.ranks]


def node_usage(status: JobStatus) -> dict[str, list[Any]]:
    """Per node, its ranks' summed latest usage: [cpu %, RSS MiB, GPU util %, GPU MiB]."""
    return {node: [t["cpu_pct"], t["rss_mib"], t["gpu_util"], t["gpu_mem_mib"]]
            for node, t in node_totals(status.ranks).items()}


def status_traits(status: JobStatus) -> dict[str, Any]:
    """The JobView traits that mirror a JobStatus."""
    first = status.first_failure
    return {
        "state": status.state.value,
        "reason": explained_reason(status.state.value, status.reason),
        "start_time": status.start_time or "",
        "elapsed": format_elapsed(status.elapsed_s) if status.elapsed_s is not None else "",
        "elapsed_s": status.elapsed_s if status.elapsed_s is not None else -1,
        "nodelist": status.nodelist or "",
        "world_size": status.world_size,
        "ranks": rank_cells(status),
        "node_usage": node_usage(status),
        "straggler": status.straggler or "",
        "stalled": status.stalled or "",
        "first_failure": first.rank if first else -1,
        "message": status.message or "",
        "terminal": status.state.terminal,
        "checkpoint": status.checkpoint or "",
        "restarts": status.restarts,
    }


def record_traits(record: JobRecord, status: JobStatus, summary: str = "") -> dict[str, Any]:
    """The JobView traits a job's record and status decide (the REST details' ``view``); the log
    decides the rest (the lines, ``metrics``, and the ``summary`` with the log's error and main
    metric: job_stream.py). ``summary``: the status's line, kept once the job ended."""
    return {"job_id": record.job_id, "job_name": record.name, "profile": record.profile,
            "tier_kind": record.tier, "script": record.script, **status_traits(status),
            "ranks_per_node": ranks_per_node(record.spec, record.world_size),
            "fold_label": fold_label(status), "summary": summary if status.state.terminal else ""}


def fold_label(status: JobStatus) -> str:
    """The one line the fail-stop's kill lines fold into once a rank failed (JobView's
    ``fold_label``), "" before."""
    failure = failure_of(status.first_failure)
    return failure.label(status.count(RankPhase.STOPPED)) if failure is not None else ""


def end_tail(text: str, status: JobStatus) -> LogTail | None:
    """Every rank's last lines of a view's kept log ``text`` (``R: `` prefixes), for why the job
    ended; None when the failing rank (rank 0 when none failed) has no line in it (the caller
    then reads the log's end)."""
    tail = LogTail()
    tail.feed_text(text)
    first = status.first_failure
    return tail if tail.has(first.rank if first is not None else 0) else None


def ranks_per_node(spec: Any, world_size: int) -> int:
    """Ranks on each node of a job record's ``spec`` (its ``nodes``), or 0 when unknown or
    uneven: the rank grid's rows before the ranks report their nodes."""
    nodes = spec.get("nodes") if isinstance(spec, dict) else None
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1 or world_size < 1:
        return 0
    return world_size // nodes if world_size % nodes == 0 else 0


def error_lines(text: str) -> list[int]:
    """Indices of the lines of ``text`` (raw log lines, rank prefixes kept) that ERROR_RE would
    flag in their text: one regex scan of the whole block, no per-line objects."""
    found: list[int] = []
    line, pos = 0, 0
    for m in _BULK_ERROR_RE.finditer(text):
        line += text.count("\n", pos, m.start())
        pos = m.start()
        if not found or found[-1] != line:
            found.append(line)
    return found


def batch_text(parts: Sequence[LogBatch]) -> str:
    """The text of consecutive batches as one block of lines, each ending with a newline."""
    texts = [p.text for p in parts if p]
    return "".join(t if t.endswith("\n") else t + "\n" for t in texts)


def lines_message(parts: Sequence[LogBatch], skipped: int, failure: Failure | None = None) -> dict[str, Any]:
    """The widget's ``lines`` message for log batches: the raw lines as one string (the front end
    splits them and their rank prefixes), the indices of error lines, and the skipped count;
    once the job has a failed rank, which lines fold (``fold_message``)."""
    return text_message(batch_text(parts), skipped, failure=failure)


def text_message(text: str, skipped: int = 0, *, reset: bool = False,
                 failure: Failure | None = None) -> dict[str, Any]:
    """The ``lines`` message of raw log lines (``reset``: they replace what the pane shows)."""
    text = strip_ansi(text)  # coloured lines (a logger's [0;36m) read as their words
    msg: dict[str, Any] = {"kind": "lines", "text": text, "errors": error_lines(text), "skipped": skipped}
    if reset:
        msg["reset"] = True
    if failure is not None:
        msg.update(fold_message(text, failure))
    return msg


def fold_message(text: str, failure: Failure) -> dict[str, list[int]]:
    """The fold part of a ``lines`` message (failstop.py): ``fold``, the indices of the
    fail-stop's kill lines the pane folds into one line; ``marks``, those of the failing rank's
    traceback starts (the fold line goes before the last one, so the traceback ends the pane)."""
    fold = fold_text(text, failure)
    return {"fold": fold.lines, "marks": fold.marks}


def message_rows(msg: dict[str, Any]) -> list[list[Any]]:
    """The [rank or None, text, is_error] rows the front end builds from a ``lines`` message
    (job_view.js rowsFromText does the same; tests and tools read messages with it)."""
    if "text" not in msg:
        return list(msg.get("lines", []))
    errors = set(msg.get("errors", []))
    parts = msg["text"].split("\n")
    if parts and parts[-1] == "":
        parts.pop()
    rows = []
    for i, raw in enumerate(parts):
        rank, text = split_log_line(raw.rstrip("\r"))
        rows.append([rank, text, i in errors])
    return rows


class _Measured(Protocol):
    def efficiency(self, status: JobStatus | None = None, *, accounting: bool = True) -> Any: ...


def used_line(job: _Measured, status: JobStatus | None = None) -> str | None:
    """What an ended job used of what it asked for, as the views' summary line ends it (``CPU
    38 % of 16 cores over 2 h 10 min; ...``; batch/efficiency.py, from the ranks' samples only:
    one read of ``usage/``), or None when nothing was sampled or they cannot be read now."""
    try:
        used = job.efficiency(status, accounting=False)
    except (TiersError, OSError):
        return None
    return used.for_summary if used else None
