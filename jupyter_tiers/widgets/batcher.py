"""Coalesces a fast stream of log lines (job LogLines, service PodLogLines, any item) into at
most a few messages a second."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

L = TypeVar("L")  # a log line of any kind


class LineBatcher(Generic[L]):
    """Collects lines from any thread and hands them to ``send`` every ``interval`` seconds.

    At most ``max_lines`` are kept per batch (the newest); older ones in the same batch are
    counted as skipped, so a job printing 10,000 lines/s costs the kernel and the browser a
    bounded amount of work. The full log stays on the cluster.

    Sends start at least ``interval`` apart, counted from the start of the previous one, so a line
    waits at most ``interval`` plus one send's duration: 0.125 s (<= 8 messages a second) keeps
    a line's way from the log file to the widget within 150 ms.
    """

    def __init__(
        self,
        send: Callable[[list[L], int], None],
        interval: float = 0.125,
        max_lines: int = 1000,
    ) -> None:
        self._send = send
        self.interval = interval
        self.max_lines = max_lines
        self._pending: list[L] = []
        self._skipped = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self.messages = 0
        self._thread = threading.Thread(target=self._run, name="jt-line-batcher", daemon=True)
        self._thread.start()

    def add(self, lines: list[L]) -> None:
        with self._lock:
            self._pending.extend(lines)
            overflow = len(self._pending) - self.max_lines
            if overflow > 0:
                del self._pending[:overflow]
                self._skipped += overflow
        self._wake.set()

    def flush(self) -> None:
        with self._lock:
            lines, skipped = self._pending, self._skipped
            self._pending, self._skipped = [], 0
        if lines or skipped:
            self.messages += 1
            self._send(lines, skipped)

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait()
            self._wake.clear()
            started = time.monotonic()
            self.flush()
            self._stopped.wait(pause_after_send(self.interval, started, time.monotonic()))

    def close(self) -> None:
        """Send what is pending and stop. Waits for a send in progress, so nothing is reported
        after close() returns and the last message holds the newest lines."""
        self._stopped.set()
        self._wake.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
        self.flush()


def pause_after_send(interval: float, started: float, now: float) -> float:
    """Rate limit: sends start at least ``interval`` apart, and the send's own time counts."""
    return max(0.0, interval - (now - started))
