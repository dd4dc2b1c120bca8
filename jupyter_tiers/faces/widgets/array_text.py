"""Plain-text view of a job array for terminal IPython, nbclient and scripts: a line per task
state change, then a row per task and the array's summary line (task logs are not interleaved:
``%tiers logs ID_i`` prints one)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TextIO

from ...batch.arrays import format_tasks, task_index
from ...core.model import JobStatus
from ...core.plaintext import printable
from ...data.checkpoint_upload import wants_upload
from ...engine.array_job import ArrayJob


class ArrayTextView:
    """Follows every task of an array through the tier's one watcher (batched queries)."""

    def __init__(self, job: ArrayJob, out: TextIO | None = None, *, attach: bool = False) -> None:
        self.job = job
        self.attach = attach
        self.out = out or sys.stdout
        self._lock = threading.Lock()
        self.final_status: JobStatus | None = None
        self.tasks: dict[int, JobStatus] = {}
        self.summary = ""

    def _print(self, text: str) -> None:
        """Status lines and the task table (states, reasons, the summary): cluster text as text."""
        with self._lock:
            self.out.write(printable(text, keep="\n") + "\n")
            self.out.flush()

    def header(self) -> str:
        rec, plan = self.job.record, self.job.plan
        verb = "on" if self.attach else "submitted to"
        what = "sweep" if plan.sweep else "array"
        limit = f", at most {plan.limit} at once" if plan.limit else ""
        return (f"{what} {rec.job_id} ({rec.name}) {verb} {rec.profile}: {len(plan)} task"
                f"{'s' if len(plan) != 1 else ''} of {rec.world_size} rank"
                f"{'s' if rec.world_size != 1 else ''}{limit}")

    def run(self, timeout: float | None = None) -> JobStatus | None:
        """Print each task's state changes until every task has ended; then the task table and
        the summary line. Returns the array's status (None if ``timeout`` came first)."""
        self._print(self.header())
        records = self.job.task_records()
        labels = dict(zip(self.job.plan.indices, self.job.plan.labels, strict=True))
        done = threading.Event()
        shown: dict[int, str] = {}
        ended: set[int] = set()
        uploads = wants_upload(self.job.record)

        def make(index: int) -> tuple[Callable[[JobStatus], None], Callable[[JobStatus], None]]:
            def on_status(status: JobStatus) -> None:
                with self._lock:
                    self.tasks[index] = status
                if shown.get(index) != status.state.value:
                    shown[index] = status.state.value
                    self._print(f"[task {index} {labels[index]}] {status.state.value}")

            def on_end(status: JobStatus) -> None:  # with --checkpoint-to: after its upload
                on_status(status)
                if uploads and status.checkpoint:
                    self._print(f"[task {index} {labels[index]}] checkpoint {status.checkpoint}")
                with self._lock:
                    ended.add(index)
                    finished = len(ended) == len(records)
                if finished:
                    done.set()
            return on_status, on_end

        subs = []
        for task in self.job.tasks:
            on_status, on_end = make(task_index(task.id))
            subs.append(task.watch(on_status, on_end=on_end))
        try:
            done.wait(timeout)
        finally:
            for sub in subs:
                sub.close()
        if not done.is_set():
            return None
        tasks = dict(self.tasks)
        self.final_status = self.job.record_counts(tasks)
        failures, metrics = self.job.task_results(tasks)
        self._print(format_tasks(self.job.plan, tasks, metrics))

        self.summary = self.job.summary_of(tasks, failures, metrics)
        self._print(self.summary)
        return self.final_status
