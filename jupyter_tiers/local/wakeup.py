"""The self-pipe a local supervisor sleeps on, so that a signal or a thread wakes it at once.

Used by the job supervisor and the service supervisor. This module imports only the standard
library, to start fast.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
from collections.abc import Callable, Iterable
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Wakeup:
    """A non-blocking pipe: signals (``set_wakeup_fd``) and ``wake()`` end a ``wait()`` early."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()

    def install(self, handler: Callable[[int, FrameType | None], object],
                defaults: Iterable[signal.Signals] = (signal.SIGQUIT,)) -> None:
        """Route SIGTERM/SIGINT/SIGHUP to ``handler``; every signal (SIGCHLD too) wakes ``wait``.

        ``defaults`` are reset to SIG_DFL, so that the children do not inherit them ignored.
        """
        for fd in (self.read_fd, self.write_fd):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(self.write_fd, warn_on_full_buffer=False)
        for sig in STOP_SIGNALS:
            signal.signal(sig, handler)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # only to wake select()
        for sig in defaults:
            signal.signal(sig, signal.SIG_DFL)

    def wake(self) -> None:
        """End the current or next ``wait`` at once (safe from any thread)."""
        with contextlib.suppress(OSError):
            os.write(self.write_fd, b"p")

    def wait(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds or until woken; whether anything woke it."""
        select.select([self.read_fd], [], [], max(0.0, timeout))
        woken = False
        with contextlib.suppress(BlockingIOError):
            while os.read(self.read_fd, 4096):
                woken = True
        return woken
