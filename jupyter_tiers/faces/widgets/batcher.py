"""Coalesces a fast stream of log lines (job LogLines, service PodLogLines, any item) into at
most a few messages a second."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

L = TypeVar("L")  # a log line of any kind


def _flatten(parts: list[Sequence[L]]) -> list[L]:
    return [line for part in parts for line in part]


class LineBatcher(Generic[L]):
    """Collects lines from any thread and hands them to ``send`` every ``interval`` seconds.

    At most ``max_lines`` are kept per batch (the newest); older ones in the same batch are
    counted as skipped, so a job printing 10,000 lines/s costs the kernel and the browser a
    bounded amount of work. The full log stays on the cluster.

    Lines are added as sequences and kept as added (a job log's :class:`~jupyter_tiers.batch.logs.LogBatch`
    stays bytes): trimming drops whole sequences, then slices the first one (``part[k:]``).
    ``send`` gets ``join(parts)`` and the skipped count; ``join`` defaults to one flat list of
    lines, and ``join=list`` hands over the sequences themselves.

    Sends start at least ``interval`` apart, counted from the start of the previous one, so a line
    waits at most ``interval`` plus one send's duration: 0.125 s (<= 8 messages a second) keeps
    a line's way from the log file to the widget within 150 ms.
    """

    def __init__(
        self,
        send: Callable[[Any, int], None],
        interval: float = 0.125,
        max_lines: int = 1000,
        *,
        join: Callable[[list[Sequence[L]]], Any] = _flatten,
    ) -> None:
        self._send = send
        self._join = join
        self.interval = interval
        self.max_lines = max_lines
        self._parts: collections.deque[Sequence[L]] = collections.deque()
        self._count = 0
        self._skipped = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self.messages = 0
        self._thread = threading.Thread(target=self._run, name="jt-line-batcher", daemon=True)
        self._thread.start()

    def add(self, lines: Sequence[L]) -> None:
        n = len(lines)
        if not n:
            return
        with self._lock:
            self._parts.append(lines)
            self._count += n
            # Whole sequences that the newer ones make unnecessary go at once (bounded memory).
            while self._count - len(self._parts[0]) >= self.max_lines:
                dropped = len(self._parts.popleft())
                self._count -= dropped
                self._skipped += dropped
        self._wake.set()

    def flush(self) -> None:
        with self._lock:
            parts, count, skipped = list(self._parts), self._count, self._skipped
            self._parts.clear()
            self._count = self._skipped = 0
        over = count - self.max_lines
        if over > 0:
            parts[0] = parts[0][over:]
            skipped += over
        if parts or skipped:
            self.messages += 1
            self._send(self._join(parts), skipped)

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
