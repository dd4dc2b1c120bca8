"""ArrayView: one live widget for a whole job array.

A table of the tasks (ArrayTable, an anywidget: parameters, state, elapsed, last metric value,
exit; Cancel all and Cancel per task, each with a confirmation), and below it the selected task's
own JobView (its rank grid, log and charts: the job widget itself, not a second copy of it).
Every task is followed through the tier's one watcher, without its log (the batched status
queries cover them all); a task's metric and failure are read from the end of its log once it
has ended.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anywidget
import ipywidgets
import traitlets as t

from ...app.viewstate.array import task_row
from ...batch.arrays import aggregate_status, counts_text, task_index
from ...core.errors import TiersError
from ...core.model import JobStatus
from ...engine.array_job import ArrayJob
from ...engine.subscription import Subscription
from .job_view import JobView
from .view_common import view_module

_HERE = Path(__file__).parent
class ArrayTable(anywidget.AnyWidget):
    """The task table of an ArrayView (front end: array_view.js; text via textContent only)."""

    _esm = view_module("array_view.js")
    # The job widget's styles (state badges, controls, theme colours), then the table's.
    _css = "\n".join((_HERE / name).read_text(encoding="utf-8")
                      for name in ("job_view.css", "array_view.css"))

    array_id = t.Unicode("").tag(sync=True)
    array_name = t.Unicode("").tag(sync=True)
    profile = t.Unicode("").tag(sync=True)
    tier_kind = t.Unicode("").tag(sync=True)
    sweep = t.Bool(False).tag(sync=True)
    limit = t.Int(0).tag(sync=True)
    state = t.Unicode("PENDING").tag(sync=True)
    counts = t.Unicode("").tag(sync=True)
    tasks: t.List[list[Any]] = t.List().tag(sync=True)
    selected = t.Int(-1).tag(sync=True)
    terminal = t.Bool(False).tag(sync=True)
    summary = t.Unicode("").tag(sync=True)
    cancel_requested = t.Bool(False).tag(sync=True)
    message = t.Unicode("").tag(sync=True)


class ArrayView(ipywidgets.VBox):
    """Live view of an ArrayJob: the task table, then the selected task's JobView."""

    def __init__(self, job: ArrayJob, **kwargs: Any) -> None:
        plan = job.plan
        self.table = ArrayTable(array_id=job.id, array_name=job.name, profile=job.record.profile,
                                tier_kind=job.record.tier, sweep=plan.sweep, limit=plan.limit or 0)
        super().__init__(children=[self.table], **kwargs)
        self.job = job
        self.plan = plan
        self.labels = dict(zip(plan.indices, plan.labels, strict=True))
        self.statuses: dict[int, JobStatus] = {}
        self.metrics: dict[int, tuple[str, float]] = {}
        self.failures: dict[int, str] = {}
        self.final_status: JobStatus | None = None
        self.ended = threading.Event()
        self.task_view: Any = None
        self._lock = threading.Lock()
        self._subs: list[Subscription[JobStatus]] = []
        self._refresh()
        self.table.on_msg(self._on_front_end_msg)
        for task in job.tasks:
            index = task_index(task.id)
            self._subs.append(task.watch(self._status_cb(index), on_end=self._end_cb(index)))

    @property
    def summary(self) -> str:
        return self.table.summary

    # --- from the watcher (background threads) ---------------------------------------
    def _status_cb(self, index: int) -> Any:
        def on_status(status: JobStatus) -> None:
            with self._lock:
                self.statuses[index] = status
            self._refresh()
        return on_status

    def _end_cb(self, index: int) -> Any:
        def on_end(status: JobStatus) -> None:  # on its own thread: reading the log may take a while
            failures, metrics = self.job.task_results({index: status})
            with self._lock:
                self.statuses[index] = status
                self.failures.update(failures)
                self.metrics.update(metrics)
                done = len(self.statuses) == len(self.plan) and all(
                    s.state.terminal for s in self.statuses.values()) and not self.ended.is_set()
            self._refresh()
            if done:
                self._finish()
        return on_end

    def _finish(self) -> None:
        with self._lock:
            tasks = dict(self.statuses)
        self.final_status = self.job.record_counts(tasks)
        self.table.summary = self.job.summary_of(tasks, self.failures, self.metrics)
        self.table.terminal = True
        self.table.state = self.final_status.state.value
        for sub in self._subs:
            sub.close()
        self.ended.set()

    def _refresh(self) -> None:
        with self._lock:
            rows = [task_row(i, self.labels[i], self.statuses.get(i), self.metrics.get(i),
                             self.failures.get(i)) for i in self.plan.indices]
            states = [s.state for s in self.statuses.values()]
            known = len(self.statuses) == len(self.plan)

        with self.table.hold_sync():
            self.table.tasks = rows
            if known:
                self.table.state = aggregate_status(self.job.id, dict(self.statuses)).state.value
                self.table.counts = counts_text(states)

    # --- from the front end --------------------------------------------------------------
    def _on_front_end_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        kind = content.get("kind")
        raw = content.get("task")
        task = raw if isinstance(raw, int) and not isinstance(raw, bool) else -1
        valid = task in self.labels
        if kind == "select" and valid:
            self.select(task)
        elif kind == "cancel_task" and valid:
            threading.Thread(target=self._cancel, args=(task,), name="jt-cancel", daemon=True).start()
        elif kind == "cancel" and not self.table.terminal:
            self.table.cancel_requested = True
            threading.Thread(target=self._cancel, args=(None,), name="jt-cancel", daemon=True).start()

    def _cancel(self, task: int | None) -> None:
        """Cancel one task (or all of them with None); a refusal is shown, and may be tried again."""
        try:
            (self.job.cancel if task is None else self.job.task(task).cancel)()
        except TiersError as exc:  # refused (not the user's job, say): say so, allow another try
            with self.table.hold_sync():
                if task is None:
                    self.table.cancel_requested = False
                self.table.message = str(exc)

    # --- Python API ----------------------------------------------------------------------
    def select(self, index: int) -> None:
        """Show task ``index``'s own JobView (rank grid, log) below the table (again: hide it)."""
        if self.task_view is not None:
            self.task_view.close()
            self.task_view = None
        if self.table.selected == index:
            self.table.selected = -1
            self.children = [self.table]
            return
        self.table.selected = index
        self.task_view = JobView(self.job.task(index))
        self.children = [self.table, self.task_view]

    def wait(self, timeout: float | None = None) -> JobStatus | None:
        """Block until every task has ended (and the summary is made); returns the array status."""
        self.ended.wait(timeout)
        return self.final_status

    def close(self) -> None:
        for sub in self._subs:
            sub.close()
        if self.task_view is not None:
            self.task_view.close()
        self.table.close()
        super().close()
