"""The handle of a job array: one registry record, its tasks as Job handles (see arrays.py)."""

from __future__ import annotations

import contextlib
import posixpath
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from ..batch.arrays import (
    ArrayPlan,
    aggregate_status,
    array_summary,
    best_task,
    counts_text,
    plan_of,
    record_counts,
    task_index,
    task_records,
)
from ..batch.metrics import MetricsTracker
from ..batch.status import describe_rank
from ..config.registry import JobRecord
from ..core.errors import JobNotFound, TiersError
from ..core.model import JobState, JobStatus
from ..data.checkpoint_upload import UploadError, task_order, upload_checkpoint, uploads_text, wants_upload
from ..data.handoff import encode_detail, task_uploads
from .handles import Job
from .subscription import wait_for

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
            record_counts(self.tier.registry, self.record.key, status.state.value,
                          counts_text([s.state for s in tasks.values()]))
        return status

    def status(self) -> JobStatus:
        """The array as one status: state over all tasks, the counts line as ``reason``."""
        return aggregate_status(self.id, self.task_statuses())

    def wait(self, timeout: float | None = None) -> JobStatus:
        """Block until every task has ended (or ``timeout``); returns the array's status. With
        ``--checkpoint-to`` a task ends once its checkpoint's upload has."""
        deadline = None if timeout is None else time.monotonic() + timeout
        subs = {task_index(task.id): task.watch() for task in self.tasks}
        try:
            for sub in subs.values():  # each until it ends (with --checkpoint-to: after its upload)
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                wait_for(sub, lambda status: False, left)
        finally:
            for sub in subs.values():
                sub.close()
        tasks = {index: sub.latest for index, sub in subs.items() if sub.latest is not None}
        if len(tasks) < len(subs) or not all(s.state.terminal for s in tasks.values()):
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
        1 CANCELLED; best loss 0.0123 at lr=3e-4 bs=64`` (reads the end of each task's log), then
        with ``--checkpoint-to`` the tasks' checkpoint URIs, best first."""
        tasks = tasks if tasks is not None else self.task_statuses()
        failures, metrics = self.task_results(tasks)
        return self.summary_of(tasks, failures, metrics)

    def summary_of(self, tasks: dict[int, JobStatus], failures: dict[int, str],
                   metrics: dict[int, tuple[str, float]]) -> str:
        """The summary line from what the caller already read (the views)."""
        line = array_summary(self.id, self.plan, tasks, failures=failures, metrics=metrics)
        if not wants_upload(self.record):
            return line
        best = best_task(metrics)
        text = uploads_text(self.uploads(), best[0] if best else None)
        return f"{line}; {text}" if text else line

    # --- --checkpoint-to -----------------------------------------------------------------
    def uploads(self) -> dict[int, dict[str, Any]]:
        """Each task's checkpoint upload on record (``--checkpoint-to``): task index -> its
        state (uploading, done, interrupted, failed), uri, sent and total bytes, error."""
        try:
            detail = self.tier.registry.get(self.record.key).detail
        except JobNotFound:
            detail = self.record.detail
        return task_uploads(detail)

    def upload_all(self) -> dict[int, str]:
        """Upload (or finish uploading) the newest checkpoint of every COMPLETED task to
        ``--checkpoint-to`` (``.../{name}/{ID}_{i}/{checkpoint}``), the best task first; one
        status query and one listing of all tasks' checkpoints. Returns task -> URI in that
        order; a one-line UploadError naming each task that could not be uploaded (after the
        others were)."""
        tasks = self.task_statuses()
        completed = [i for i in self.plan.indices if i in tasks and tasks[i].state is JobState.COMPLETED]
        if not completed:
            raise UploadError(f"array {self.id} ({self.name}) has no COMPLETED task; a checkpoint is "
                              "uploaded when a task COMPLETES")
        listed, tails = self.tier.task_checkpoints(self.record, TAIL_LINES)
        _failures, metrics = self.task_results({i: tasks[i] for i in completed}, tails=tails)
        best = best_task(metrics)
        out: dict[int, str] = {}
        errors: list[str] = []
        by_index = {task_index(r.job_id): r for r in self.task_records()}
        for i in task_order(completed, best[0] if best else None):
            directory, newest = listed.get(i) or (None, None)
            rec = replace(by_index[i], state="COMPLETED")
            if directory is not None:
                rec = replace(rec, detail=encode_detail(directory, posixpath.join(directory, newest)
                                                        if newest else None))
            try:
                out[i] = str(upload_checkpoint(self.tier, rec).done_uri)
            except TiersError as exc:
                errors.append(f"task {i}: {exc}")
        if errors:
            raise UploadError(f"array {self.id}: {len(out)} of {len(completed)} COMPLETED tasks' "
                              f"checkpoints uploaded; " + "; ".join(errors))
        return out

    def upload(self) -> str:
        """Upload (or resume) every COMPLETED task's newest checkpoint (see :meth:`upload_all`);
        returns the best task's URI (the first uploaded)."""
        return next(iter(self.upload_all().values()))
