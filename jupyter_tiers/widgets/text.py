"""Plain-text job view for terminal IPython, nbconvert/nbclient and scripts."""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import TextIO

from ..handles import Job
from ..metrics import MetricsTracker, format_last_values
from ..model import JobStatus, LogLine
from ..plaintext import printable
from ..status import summary_line


def format_line(line: LogLine) -> str:
    return f"{line.rank}: {line.text}" if line.rank is not None else line.text


class TextView:
    """Streams a job's lines as plain text, then prints the last metric values and the one-line
    summary (with the main metric and, for a failed job, its first error line)."""

    def __init__(self, job: Job, out: TextIO | None = None, *, attach: bool = False) -> None:
        self.job = job
        self.attach = attach
        self.out = out or sys.stdout
        self._lock = threading.Lock()
        self.final_status: JobStatus | None = None
        self.metrics = MetricsTracker(job.metric_patterns())

    def _print(self, text: str) -> None:
        """One status line (states, reasons, pod events, the summary): cluster text as text."""
        with self._lock:
            self.out.write(printable(text) + "\n")
            self.out.flush()

    def header(self) -> str:
        rec = self.job.record
        verb = "on" if self.attach else "submitted to"
        return (f"job {rec.job_id} ({rec.name}) {verb} {rec.profile}: "
                f"{rec.world_size} rank{'s' if rec.world_size != 1 else ''}")

    def run(self, timeout: float | None = None) -> JobStatus | None:
        """Stream the log and block until the job ends; print and return the final status."""
        self._print(self.header())
        ended = threading.Event()
        last_state: list[str] = []

        def on_status(status: JobStatus) -> None:
            label = status.state.value + (f" ({status.reason})" if status.reason and
                                          status.state.value == "PENDING" else "")
            if status.restarts:
                label += f", restart {status.restarts}"
            if not last_state or last_state[-1] != label:
                last_state.append(label)
                self._print(f"[{label}]" + (f" on {status.nodelist}" if status.nodelist else ""))

        def on_lines(lines: Sequence[LogLine]) -> None:
            self.metrics.feed(lines)
            with self._lock:
                self.out.write("".join(format_line(ln) + "\n" for ln in lines))
                self.out.flush()

        def on_end(status: JobStatus) -> None:
            self.final_status = status
            ended.set()

        watcher = self.job.tier.watcher
        sub = watcher.watch(self.job.record, on_status=on_status, on_lines=on_lines, on_end=on_end)
        try:
            ended.wait(timeout)
        finally:
            watcher.unwatch(sub)
        if self.final_status is not None:
            last = format_last_values(self.metrics.last_values())
            if last:
                self._print(f"metrics (rank {self.metrics.rank}): {last}")
            self._print(self.summary(self.final_status))
        return self.final_status

    def summary(self, status: JobStatus) -> str:
        """The summary line with what this view saw in the log: the main metric's last value
        and, for a failed job, its first error line."""
        return summary_line(status, metric=self.metrics.main(), error=self.metrics.error)
