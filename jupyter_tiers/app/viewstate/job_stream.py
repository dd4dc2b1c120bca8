"""A job's log stream as the notebook widget gets it, for the sidebar's detail panel (``view=1``).

JobView (faces/widgets/job_view.py) turns the followed log into ``lines`` messages (the raw text, the
indices of error lines, and once a rank failed which lines fold into the fail-stop's one line),
keeps rank 0's metrics for its charts, and at the end writes the summary with the main metric
and the log's first error. :class:`JobStream` does the same for one websocket with the same pure
functions (job.py, batch/failstop.py, batch/status.py) and the same metric points
(engine/rank_metrics.py, fed by the handler's log follower), so the lab panel draws what the
notebook draws. It sends two kinds of message:

- the widget's ``lines`` message plus ``offset`` (the byte offset just past it, to resume at);
- ``{"view": {TRAIT: value, ...}}``: widget traits the log decides (``metrics``,
  ``metrics_rank``, ``metrics_note``, ``fold_label``, and ``summary`` at the end).

No I/O here: the handler feeds batches (``metrics`` first, through its follower), statuses
and the end, and sends what comes out.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ...batch.celllines import in_cell
from ...batch.failstop import Failure, failure_of, fold_text
from ...batch.logs import batch_text
from ...batch.status import summary_line
from ...core.model import JobStatus, LogLine
from ...engine.rank_metrics import RankMetrics
from .job import fold_label, text_message

Send = Callable[[dict[str, Any]], None]


class JobStream:
    """One websocket's view of a job's log (see the module docstring). Thread-safe: batches come
    from the log follower's thread, statuses from the hub's; ``send`` is called under a lock, so
    messages leave in the order they were made."""

    def __init__(self, send: Send, patterns: Sequence[tuple[str, str]] = (), *, start: int = 0,
                 log_limit: int = 5000, metrics_interval: float = 1.0,
                 clock: Callable[[], float] = time.monotonic, jobdir: str = "") -> None:
        """``jobdir``: the job's directory, whose main.py frames read as the cell's lines."""
        self._send = send
        self._jobdir = jobdir
        self._lock = threading.RLock()
        #: The log's metric points: the handler's log follower feeds it every batch before
        #: :meth:`lines` gets the batch (engine/rank_metrics.py); this stream only reads it.
        self.metrics = RankMetrics(patterns, max_points=200)
        self.metrics.start_at(start)
        self._start = start
        self._log_limit = log_limit
        self._interval = metrics_interval
        self._clock = clock
        self._sent_at = -float("inf")
        self._last_view: dict[str, Any] = {}
        self._failure: Failure | None = None
        self._kept: collections.deque[tuple[str, int]] = collections.deque()  # (text, lines)
        self._kept_lines = 0
        self._offset = start
        #: Whether this stream reads the log from its start: only then are its metrics and summary
        #: the log's (a client resuming at an offset keeps what it was sent before).
        self._whole = start == 0

    # --- from the follower ------------------------------------------------------------------
    def lines(self, batch: Sequence[LogLine]) -> None:
        """A batch of the log: its ``lines`` message, and the charts when they are due."""
        text, end = batch_text(batch)
        if not text:
            return
        text = in_cell(text, self._jobdir)  # tracebacks in the cell's lines, as the notebook shows
        with self._lock:
            if end is not None:
                self._offset = end
            msg = text_message(text, failure=self._failure)
            msg["offset"] = self._offset
            count = len(text.splitlines())
            self._kept.append((text, count))
            self._kept_lines += count
            while len(self._kept) > 1 and self._kept_lines - self._kept[0][1] >= self._log_limit:
                self._kept_lines -= self._kept.popleft()[1]
            self._send(msg)
            if self._whole and self._clock() - self._sent_at >= self._interval:
                self._send_metrics()

    # --- from the hub -------------------------------------------------------------------------
    def status(self, status: JobStatus | None) -> None:
        """A new status of the job: once a rank failed, the fold line's label, and (first time,
        or another rank) the kept lines sent again as a reset, folded — as JobView does."""
        failure = failure_of(status.first_failure) if status is not None else None
        if status is None or failure is None:
            return
        with self._lock:
            self._view({"fold_label": fold_label(status)})
            if failure == self._failure:
                return
            before, self._failure = self._failure, failure
            kept = "".join(t for t, _n in self._kept)
            # A stream resumed mid-log keeps only what it sent itself: a reset would lose the rest.
            fold = fold_text(kept, failure) if kept else None
            if self._whole and fold is not None and (before is not None or fold.lines or fold.marks):
                msg = text_message(kept, reset=True, failure=failure)
                msg["offset"] = self._offset
                self._send(msg)

    def end(self, status: JobStatus | None, why: str | None = None, used: str | None = None) -> None:
        """The log is complete: the last charts and, for an ended job, the widget's summary line
        (``summary_line`` with rank 0's main metric and the log's first error, or ``why``: why
        it ended and the fix, as the widget finds it; ``used``: what it used, efficiency.py)."""
        with self._lock:
            self.status(status)
            if not self._whole:  # a resumed stream saw part of the log: the client keeps its own
                return
            self._send_metrics()
            if status is not None and status.state.terminal:
                rank0 = self.metrics.summary
                self._view({"summary": in_cell(summary_line(status, metric=rank0.main(), error=rank0.error,
                                                            why=why, used=used), self._jobdir)})

    # --- from the client ----------------------------------------------------------------------
    def pick(self, rank: int, read: Callable[[], Iterable[bytes]]) -> threading.Thread | None:
        """Chart ``rank`` (the log's rank filter moved): RankMetrics reads its history from the
        log's start (``read``) in a thread, then the charts follow it."""
        return self.metrics.pick(rank, read, self._on_picked)

    def _on_picked(self) -> None:
        with self._lock:
            if self._whole:
                self._send_metrics()

    # --- internals ----------------------------------------------------------------------------
    def _send_metrics(self) -> None:
        self._sent_at = self._clock()
        self.metrics.flush()
        rank, note, data = self.metrics.snapshot()
        self._view({"metrics": data, "metrics_rank": rank, "metrics_note": note})

    def _view(self, traits: dict[str, Any]) -> None:
        """Send the traits that changed since they were last sent."""
        changed = {k: v for k, v in traits.items() if self._last_view.get(k, object()) != v}
        if changed:
            self._last_view.update(changed)
            self._send({"view": changed})
