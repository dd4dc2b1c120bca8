"""JobView: the live widget of one job (header, rank grid, log with rank filter, controls)."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anywidget
import traitlets as t

from ...app.viewstate.job import (
    end_tail,
    fold_label,
    lines_message,
    ranks_per_node,
    status_traits,
    text_message,
)
from ...app.viewstate.job import used_line as job_used_line
from ...batch.celllines import in_cell
from ...batch.failstop import Failure, failure_of, fold_text
from ...batch.logs import LogBatch
from ...batch.status import summary_line
from ...core.errors import TiersError
from ...core.model import JobState, JobStatus, LogLine
from ...engine.handles import Job
from ...engine.rank_metrics import RankMetrics
from .batcher import LineBatcher
from .files_pane import FilesPane
from .view_common import SeenGate, view_css, view_module

_HERE = Path(__file__).parent


class JobView(anywidget.AnyWidget):
    """Live view of a Job. Subscribes to its tier's watcher; unsubscribes when the job ends.

    Log lines travel as custom messages in batches (at most 8 a second), as the log's own text
    (the front end splits lines and rank prefixes); the front end keeps at most ``log_limit``
    lines, and the kernel keeps at least as many, as message texts, for a reloaded page.
    """

    # job_view.js with the modules it imports (rank grid, metric charts, Files tab), linked in one.
    _esm = view_module("job_view.js")
    _css = view_css("job_view.css", "vendor/uplot.css")

    job_id = t.Unicode("").tag(sync=True)
    job_name = t.Unicode("").tag(sync=True)
    profile = t.Unicode("").tag(sync=True)
    tier_kind = t.Unicode("").tag(sync=True)
    state = t.Unicode("PENDING").tag(sync=True)
    reason = t.Unicode("").tag(sync=True)
    start_time = t.Unicode("").tag(sync=True)
    elapsed = t.Unicode("").tag(sync=True)
    elapsed_s = t.Int(-1).tag(sync=True)
    nodelist = t.Unicode("").tag(sync=True)
    checkpoint = t.Unicode("").tag(sync=True)  # newest entry of $JT_CHECKPOINT_DIR (full path)
    restarts = t.Int(0).tag(sync=True)  # a requeued job's restarts so far (requeue.py)
    world_size = t.Int(0).tag(sync=True)
    #: Ranks on each node as submitted (0: unknown): the grid's rows before the ranks start.
    ranks_per_node = t.Int(0).tag(sync=True)
    ranks: t.List[list[Any]] = t.List().tag(sync=True)
    #: Per node, its ranks' summed latest usage: [cpu %, RSS MiB, GPU util % or None, GPU MiB or None].
    node_usage = t.Dict().tag(sync=True)
    #: The lagging rank in one line ("rank 3 (node2) 38 % slower than the median for 2 min"), or "".
    straggler = t.Unicode("").tag(sync=True)
    #: A running job that looks hung, in one line ("no progress on any rank for 7 min: Stacks?"), or "".
    stalled = t.Unicode("").tag(sync=True)
    first_failure = t.Int(-1).tag(sync=True)
    message = t.Unicode("").tag(sync=True)
    terminal = t.Bool(False).tag(sync=True)
    summary = t.Unicode("").tag(sync=True)
    script = t.Unicode("").tag(sync=True)
    log_limit = t.Int(5000).tag(sync=True)
    lines_received = t.Int(0).tag(sync=True)
    cancel_requested = t.Bool(False).tag(sync=True)
    #: The Stacks button's last answer (job.stacks() as text, or why it could not be taken) and
    #: whether one is being taken now.
    stacks_text = t.Unicode("").tag(sync=True)
    stacks_busy = t.Bool(False).tag(sync=True)
    log_skipped_bytes = t.Int(0).tag(sync=True)
    #: Once a rank failed: the one line the fail-stop's kill lines fold into (failstop.py).
    fold_label = t.Unicode("").tag(sync=True)
    #: One rank's metrics read from the log, {key: [[x, y or None], ...]} (downsampled), for the
    #: SVG charts (metrics_chart.js); sent at most once every ``metrics_interval`` seconds.
    metrics = t.Dict().tag(sync=True)
    #: The rank ``metrics`` is of (0 unless the front end asked for another: a metrics_rank message).
    metrics_rank = t.Int(0).tag(sync=True)
    #: Why the charted rank's earlier metrics are missing, if they are.
    metrics_note = t.Unicode("").tag(sync=True)
    metrics_interval = 1.0
    #: The Files tab (files_pane.py): [name, size, mtime] rows, a note, download progress by name.
    files: t.List[list[Any]] = t.List().tag(sync=True)
    files_note = t.Unicode("").tag(sync=True)
    downloads = t.Dict().tag(sync=True)

    #: When reattaching (``log_offset=None``), show at most this much of the log's end.
    backlog_bytes = 512 * 1024

    def __init__(self, job: Job, *, log_offset: int | None = 0, **kwargs: Any) -> None:
        """Show ``job``, following its log from ``log_offset`` (None: only the log's last
        ``backlog_bytes``, for reattaching to a job that has been running for a while)."""
        super().__init__(
            job_id=job.id,
            job_name=job.name,
            profile=job.record.profile,
            tier_kind=job.record.tier,
            world_size=job.record.world_size,
            ranks_per_node=ranks_per_node(job.record.spec, job.record.world_size),
            script=job.script,
            **kwargs,
        )
        self.job = job
        self.final_status: JobStatus | None = None
        self.ended = threading.Event()
        self._buffer: collections.deque[tuple[str, int]] = collections.deque()  # (text, lines)
        self._buffered = 0
        self._send_lock = threading.Lock()  # a reset (hello, a first failure) and batches in order
        self._failure: Failure | None = None
        self._batcher: LineBatcher[Any] = LineBatcher(self._send_lines, join=list)
        # The log's metric points, fed by the watch's log follower before each batch reaches
        # _on_lines (engine/rank_metrics.py); the view only reads them.
        self._metrics: RankMetrics = job.live_metrics(200)
        self._metrics_sent = 0.0
        self.files_pane = FilesPane(self)
        self._gate = SeenGate()  # quiet while no page shows the view (view_common.py)
        self._latest: JobStatus | None = None  # the newest status, shown or held while unseen
        self.on_msg(self._on_front_end_msg)
        skip_partial = False
        if log_offset is None:
            try:
                log_offset = max(0, job.tier.log_size(job.record) - self.backlog_bytes)
            except TiersError:
                log_offset = 0
            skip_partial = log_offset > 0
            self.log_skipped_bytes = log_offset
        self._sub = job.watch(self._on_status, on_lines=self._on_lines, on_end=self._on_end,
                              log_offset=log_offset, skip_partial=skip_partial,
                              metrics=self._metrics)

    # --- from the watcher (background threads) ---------------------------------------
    def _on_lines(self, lines: Sequence[LogLine]) -> None:
        """A batch of the log as the follower read it (a LogBatch), its metrics already read
        (the follower feeds every batch to ``_metrics`` first, before the display's batcher keeps
        only each message's newest lines: the summary sees rank 0's last lines even when other
        ranks' lines crowd them out)."""
        self._batcher.add(lines)
        self._refresh_metrics()

    def _on_status(self, status: JobStatus, *, shown: bool = False) -> None:
        """``shown``: set the traits even while no page shows the view (the end: the widget's
        state stays true for the Python API and for the page that renders it later)."""
        self._latest = status
        if self._gate.paused and not shown:  # unseen: kept for the page that shows the view again
            self._failure = failure_of(status.first_failure) or self._failure
            return
        with self.hold_sync():
            for key, value in status_traits(status).items():
                setattr(self, key, value)
            failure = failure_of(status.first_failure)
            if failure is not None:
                self.fold_label = fold_label(status)
        if failure is not None and failure != self._failure:
            with self._send_lock:
                before, self._failure = self._failure, failure
                # Lines sent before to fold or mark now (or folded for another rank): send them
                # again, so the fold line's place does not depend on which came first.
                fold = fold_text(self._kept_text(), failure)
                if before is not None or fold.lines or fold.marks:
                    self._send_all()

    def _kept_text(self) -> str:
        return "".join(t for t, _n in list(self._buffer))

    def _send_all(self) -> None:
        """Send every kept line again as a reset (a reloaded page; a first failure to fold)."""
        self.send(text_message(self._kept_text(), reset=True, failure=self._failure))

    def _send_lines(self, parts: list[LogBatch], skipped: int) -> None:
        with self._send_lock:
            msg = lines_message(parts, skipped, self._failure)
            msg["text"] = in_cell(msg["text"], self.job.record.jobdir)  # tracebacks in cell lines
            count = sum(len(p) for p in parts)
            self._buffer.append((msg["text"], count))
            self._buffered += count
            while self._buffered - self._buffer[0][1] >= self.log_limit:
                self._buffered -= self._buffer.popleft()[1]
            self.lines_received += count + skipped
            if not self._gate.paused:
                self.send(msg)
        self._refresh_metrics()

    def _refresh_metrics(self, *, final: bool = False) -> None:
        """Refresh the charts' trait when ``metrics_interval`` has passed, or at the end."""
        now = time.monotonic()
        if final or now - self._metrics_sent >= self.metrics_interval:
            self._metrics_sent = now
            self._show_metrics()

    def _on_end(self, status: JobStatus) -> None:
        self._batcher.close()
        self.final_status = status
        self._on_status(status, shown=True)
        self._refresh_metrics(final=True)
        rank0 = self._metrics.summary
        reason = None
        if status.state.terminal and status.state is not JobState.COMPLETED:
            try:
                reason = self.job.end_reason(status, tail=end_tail(self._kept_text(), status),
                                             last_step=rank0.step)
            except TiersError:  # the log's end could not be read: the summary without it
                reason = None
        self.summary = in_cell(summary_line(status, metric=rank0.main(), error=rank0.error,
                                            why=reason.line if reason else None, used=self._used(status)),
                               self.job.record.jobdir)
        self._sub.close()
        self.ended.set()

    def _used(self, status: JobStatus) -> str | None:
        """What the job used of what it asked for (one read of its samples), or None."""
        return job_used_line(self.job, status)

    # --- from the front end --------------------------------------------------------------
    def _on_front_end_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        kind = content.get("kind")
        if kind == "hello":  # a (re)loaded page asks for what it missed
            if self._gate.seen():  # and the view had gone quiet: its status and charts too
                self._catch_up()
            else:  # (the traits are current: set again, they would undo any set since)
                with self._send_lock:
                    self._send_all()
        elif kind == "seen":  # a page still shows the view (every 60 s)
            if self._gate.seen():
                self._catch_up()
        elif kind == "metrics_rank":
            rank = content.get("rank")
            if isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank < max(1, self.world_size):
                self._metrics.pick(rank, lambda: self.job.tier.log_chunks(self.job.record, 0),
                                   self._show_metrics)
        elif self.files_pane.on_message(content):
            pass
        elif kind == "cancel" and not self.terminal:
            self.cancel_requested = True
            threading.Thread(target=self._cancel, name="jt-cancel", daemon=True).start()
        elif kind == "stacks" and not self.stacks_busy:
            self.stacks_busy = True
            threading.Thread(target=self._take_stacks, name="jt-stacks", daemon=True).start()

    def _take_stacks(self) -> None:
        """The Stacks button: every running rank's stack, grouped (job.stacks()), as text."""
        try:
            text = str(self.job.stacks())
        except (TiersError, OSError) as exc:
            text = f"stacks of job {self.job_id} could not be taken: {exc}"
        with self.hold_sync():
            self.stacks_text = text
            self.stacks_busy = False

    def _catch_up(self) -> None:
        """Everything a page needs at once: the newest status, every kept line, the charts."""
        if self._latest is not None:
            self._on_status(self._latest)
        with self._send_lock:
            self._send_all()
        self._show_metrics()

    def _cancel(self) -> None:
        try:
            self.job.cancel()
        except TiersError as exc:  # refused (not the user's job, say): say so, allow another try
            with self.hold_sync():
                self.cancel_requested = False
                self.message = str(exc)

    def _show_metrics(self) -> None:
        """Sync the charted rank's series (with the rank and note, which change together)."""
        if self._gate.paused:
            return
        self._metrics.flush()  # what the follower's throttle kept since its last full parse
        rank, note, data = self._metrics.snapshot()
        with self.hold_sync():
            if data != self.metrics:
                self.metrics = data
            self.metrics_rank = rank
            self.metrics_note = note

    # --- Python API ----------------------------------------------------------------------
    def wait(self, timeout: float | None = None) -> JobStatus | None:
        """Block until the job has ended and its log is complete; returns the final status."""
        self.ended.wait(timeout)
        return self.final_status

    def close(self) -> None:
        self._sub.close()
        self._batcher.close()
        super().close()

    def __repr__(self) -> str:
        # No state here: a saved notebook keeps this text as first shown; the line under the
        # widget (display.LiveLine) is the one kept current.
        return f"JobView(job {self.job_id} {self.job_name!r})"
