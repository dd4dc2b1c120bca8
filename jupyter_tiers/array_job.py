"""The handle of a job array: one registry record, its tasks as Job handles (see arrays.py)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from .arrays import (
    ArrayPlan,
    aggregate_status,
    array_summary,
    counts_detail,
    plan_of,
    task_index,
    task_records,
)
from .errors import JobNotFound
from .handles import Job
from .metrics import MetricsTracker
from .model import JobStatus
from .registry import JobRecord
from .status import describe_rank

TAIL_LINES = 400  # of each ended task's log, read once for its last metric and first error


class ArrayJob(Job):
    """Handle on a job array (``--array`` / ``--sweep``): ``tasks``, ``task(i)``, and the whole
    array's status, wait, cancel and summary. Each task is a Job with its own ranks and log."""

    @property
    def plan(self) -> ArrayPlan:
        plan = plan_of(self.record.spec)
        assert plan is not None
        return plan

    def task_records(self) -> list[JobRecord]:
        return task_records(self.record)

    @property
    def tasks(self) -> list[Job]:
        """One Job handle per task, in task order."""
        return [Job(self.tier, r) for r in self.task_records()]

    def task(self, index: int) -> Job:
        """The task with this array index (``job.task(7)``: Slurm's ``ID_7``)."""
        for rec in self.task_records():
            if task_index(rec.job_id) == index:
                return Job(self.tier, rec)
        raise JobNotFound(f"array {self.id} has no task {index}; its tasks: {self.plan.slurm_spec}")

    def params(self, index: int) -> dict[str, Any]:
        """The parameters task ``index`` gets (its ``JT_PARAMS``)."""
        return dict(self.plan.params_of(index))

    def task_statuses(self) -> dict[int, JobStatus]:
        """Every task's status now: one scheduler query and one rank read for all of them."""
        recs = self.task_records()
        by_id = self.tier.status(recs)
        out = {task_index(r.job_id): by_id[r.job_id] for r in recs if r.job_id in by_id}
        self.record_counts(out)
        return out

    def record_counts(self, tasks: dict[int, JobStatus]) -> JobStatus:
        """Record the array's state and task counts in the registry; returns the array status."""
        status = aggregate_status(self.id, tasks)
        # The registry is a record, not the job: a failed update changes nothing else.
        with contextlib.suppress(Exception):
            self.tier.registry.update(self.record.key, state=status.state.value,
                                      detail=counts_detail([s.state for s in tasks.values()]))
        return status

    def status(self) -> JobStatus:
        """The array as one status: state over all tasks, the counts line as ``reason``."""
        return aggregate_status(self.id, self.task_statuses())

    def wait(self, timeout: float | None = None) -> JobStatus:
        """Block until every task has ended (or ``timeout``); returns the array's status."""
        recs = self.task_records()
        done = threading.Event()
        latest: dict[int, JobStatus] = {}
        lock = threading.Lock()

        def make(index: int) -> Any:
            def on_status(status: JobStatus) -> None:
                with lock:
                    latest[index] = status
                    if len(latest) == len(recs) and all(s.state.terminal for s in latest.values()):
                        done.set()
            return on_status

        watcher = self.tier.watcher
        subs = [watcher.watch(r, on_status=make(task_index(r.job_id)), follow_logs=False) for r in recs]
        try:
            done.wait(timeout)
        finally:
            for sub in subs:
                watcher.unwatch(sub)
        with lock:
            tasks = dict(latest)
        if len(tasks) < len(recs):
            return self.status()
        return self.record_counts(tasks)

    def cancel(self) -> None:
        """Cancel every task (on Slurm one ``scancel`` of the array)."""
        self.tier.cancel_array(self.record, self.task_records())
        self.tier.watcher.kick()

    def stop(self) -> str:
        self.cancel()
        return f"cancel requested for array {self.id} ({self.name}, {len(self.plan)} tasks)"

    def metrics(self, rank: int | None = 0) -> dict[int, Any]:
        """Task index -> that task's metric series (see Job.metrics)."""
        return {task_index(job.id): job.metrics(rank) for job in self.tasks}

    def iter_logs(self, offset: int = 0) -> Iterator[str]:
        """Every task's log in task order, each after a ``== task I (PARAMS) ==`` line."""
        for job, label in zip(self.tasks, self.plan.labels, strict=True):
            yield f"== task {task_index(job.id)} ({label}) ==\n"
            yield from job.iter_logs()

    def logs(self, rank: int | None = None, tail: int | None = None) -> str:
        """Every task's log (or one rank's lines, or the last ``tail`` lines), task by task."""
        parts = []
        for job, label in zip(self.tasks, self.plan.labels, strict=True):
            parts.append(f"== task {task_index(job.id)} ({label}) ==\n" + job.logs(rank=rank, tail=tail))
        return "".join(parts)

    def task_results(self, tasks: dict[int, JobStatus], tails: dict[int, str] | None = None
                     ) -> tuple[dict[int, str], dict[int, tuple[str, float]]]:
        """(failures, metrics) of the ended tasks, from the end of each task's log: what failed
        (the first failed rank and the first error line) and the main metric's last value.
        ``tails``: the ends of the tasks' logs already read (a task absent from it has none)."""
        failures: dict[int, str] = {}
        metrics: dict[int, tuple[str, float]] = {}
        for job in self.tasks:
            i = task_index(job.id)
            st = tasks.get(i)
            if st is None or not st.state.terminal:
                continue
            tracker = MetricsTracker(self.metric_patterns())
            try:
                tracker.feed_text(tails.get(i, "") if tails is not None else
                                  self.tier.tail_log(job.record, TAIL_LINES).decode("utf-8", "replace"))
            except Exception:  # a log that cannot be read leaves the row without a metric
                continue
            main = tracker.main()
            if main is not None:
                metrics[i] = main
            first = st.first_failure
            parts = [describe_rank(first)] if first is not None else []
            if tracker.error:
                parts.append(tracker.error)
            if parts:
                failures[i] = " — ".join(parts)
        return failures, metrics

    def summary(self, status: JobStatus | None = None, tasks: dict[int, JobStatus] | None = None) -> str:
        """``array 51 (16 tasks) 14 COMPLETED, 1 FAILED (task 7: rank 0 exit 1 — ValueError: ...),
        1 CANCELLED; best loss 0.0123 at lr=3e-4 bs=64`` (reads the end of each task's log)."""
        tasks = tasks if tasks is not None else self.task_statuses()
        failures, metrics = self.task_results(tasks)
        return array_summary(self.id, self.plan, tasks, failures=failures, metrics=metrics)
