"""Plain-text job view for terminal IPython, nbconvert/nbclient and scripts."""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import TextIO

from ...batch.celllines import in_cell
from ...batch.endreason import LogTail
from ...batch.failstop import Failure, failure_of, is_failstop_line, is_stop_report
from ...batch.metrics import format_last_values
from ...batch.pending import explained_reason
from ...batch.status import summary_line
from ...core.errors import TiersError
from ...core.model import JobStatus, LogLine, RankPhase
from ...core.plaintext import printable
from ...engine.handles import Job


def format_line(line: LogLine) -> str:
    return f"{line.rank}: {line.text}" if line.rank is not None else line.text


class FailStopFold:
    """The text view's fold of the fail-stop's kill lines (failstop.py). A stream cannot take
    back a line, so Slurm's stop reports are held while no rank is known to have failed; once
    one is, those that are kills are counted instead of printed (the others are printed), and
    :meth:`summary` is the one line that stands for them."""

    def __init__(self) -> None:
        self.failure: Failure | None = None
        self.stopped = 0
        self.folded = 0
        self._held: list[LogLine] = []

    def status(self, status: JobStatus) -> list[LogLine]:
        """Take a status in; returns the held lines to print now."""
        failure = failure_of(status.first_failure)
        if failure is None:
            return []
        self.failure = failure
        self.stopped = status.count(RankPhase.STOPPED)
        held, self._held = self._held, []
        return self.lines(held)

    def lines(self, lines: Sequence[LogLine]) -> list[LogLine]:
        """The lines to print of a batch (the others are held or folded)."""
        shown: list[LogLine] = []
        for line in lines:
            if line.rank is not None or not is_stop_report(line.text):
                shown.append(line)
            elif self.failure is None:
                self._held.append(line)
            elif is_failstop_line(line.text, self.failure):
                self.folded += 1
            else:
                shown.append(line)
        return shown

    def end(self) -> list[LogLine]:
        """At the end: the lines still held (no rank failed), to print."""
        held, self._held = self._held, []
        return held

    def summary(self, job_id: str) -> str | None:
        """The fold's line, or None when nothing was folded."""
        if self.failure is None or not self.folded:
            return None
        noun = "line" if self.folded == 1 else "lines"
        return (f"{self.failure.label(self.stopped)} ({self.folded} Slurm {noun} not shown; "
                f"%tiers logs {job_id} has them)")


class TextView:
    """Streams a job's lines as plain text, then prints the last metric values and the one-line
    summary (with the main metric and, for a failed job, its first error line). The fail-stop's
    kill lines are folded into one line (:class:`FailStopFold`)."""

    def __init__(self, job: Job, out: TextIO | None = None, *, attach: bool = False) -> None:
        self.job = job
        self.attach = attach
        self.out = out or sys.stdout
        self._lock = threading.Lock()
        self.final_status: JobStatus | None = None
        self.metrics = job.live_metrics()  # fed by the watch's log follower (rank_metrics.py)
        self.tail = LogTail()  # every rank's last lines: why the job ended
        self.fold = FailStopFold()

    def _print(self, text: str) -> None:
        """One status line (states, reasons, pod events, the summary): cluster text as text."""
        with self._lock:
            self.out.write(printable(text) + "\n")
            self.out.flush()

    def _print_lines(self, lines: Sequence[LogLine]) -> None:
        if lines:
            text = "".join(format_line(ln) + "\n" for ln in lines)
            self.out.write(in_cell(text, self.job.record.jobdir))  # tracebacks in the cell's lines
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
            # why it waits, or what Slurm called a state this version has no name for
            reason = explained_reason(status.state.value, status.reason)
            label = status.state.value + (f" ({reason})" if reason and
                                          status.state.value in ("PENDING", "UNKNOWN") else "")
            if status.restarts:
                label += f", restart {status.restarts}"
            if not last_state or last_state[-1] != label:
                last_state.append(label)
                self._print(f"[{label}]" + (f" on {status.nodelist}" if status.nodelist else ""))
            with self._lock:
                self._print_lines(self.fold.status(status))

        def on_lines(lines: Sequence[LogLine]) -> None:
            for line in lines:
                self.tail.feed(line.rank, line.text)
            with self._lock:
                self._print_lines(self.fold.lines(lines))

        def on_end(status: JobStatus) -> None:
            self.final_status = status
            ended.set()

        with self.job.watch(on_status, on_lines=on_lines, on_end=on_end, metrics=self.metrics):
            ended.wait(timeout)
        with self._lock:
            if self.final_status is not None:
                self._print_lines(self.fold.status(self.final_status))
            self._print_lines(self.fold.end())
        folded = self.fold.summary(self.job.record.job_id)
        if folded:
            self._print(folded)
        if self.final_status is not None:
            self.metrics.flush()
            rank0 = self.metrics.summary
            last = format_last_values(rank0.last_values())
            if last:
                self._print(f"metrics (rank {rank0.rank}): {last}")
            self._print(self.summary(self.final_status))
        return self.final_status

    def summary(self, status: JobStatus) -> str:
        """The summary line with what this view saw in the log: the main metric's last value
        and, for a job that did not complete, why it ended with the fix (else its first error
        line)."""
        try:
            reason = self.job.end_reason(status, tail=self.tail, last_step=self.metrics.summary.step)
        except TiersError:  # the facts could not be read: the summary without them
            reason = None
        rank0 = self.metrics.summary
        return in_cell(summary_line(status, metric=rank0.main(), error=rank0.error,
                                    why=reason.line if reason else None), self.job.record.jobdir)
