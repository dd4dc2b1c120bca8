"""A clock-free measure of the work a call does, for the hostile-input tests of the parsers.

Timing is flaky on shared machines, and Python's ``re`` has no step counter, but the interpreter
checks for pending signals at known points: at Python-level calls and backward jumps, and inside
the regex engine once every few thousand steps of its matching loop (``_sre`` calls
``PyErr_CheckSignals`` there so that Ctrl-C can stop a runaway match). :func:`work` keeps a
signal pending for the whole call, so each of those checks runs the handler once; the count is
a deterministic measure of the steps taken, the regex engine's included, whatever the machine's
load. A quadratic pattern on a few thousand characters counts in the thousands, a linear one in
the tens.

The handler re-arms the signal from C (a property whose getter is ``_thread.interrupt_main``)
as its last act, so no bytecode runs between the re-arming and the handler's return that would
deliver it again at once: the next delivery is the next check of the measured call.
"""

from __future__ import annotations

import _thread
import re
import signal
import threading
from collections.abc import Callable
from typing import Any

import pytest

_SIGNAL = getattr(signal, "SIGUSR1", None)


class _Rearm(int):
    now = property(_thread.interrupt_main)  # reading ``.now`` makes the signal pending again


def work(call: Callable[[], Any]) -> int:
    """The number of signal checks the interpreter made while ``call()`` ran."""
    if _SIGNAL is None or threading.current_thread() is not threading.main_thread():
        pytest.skip("counting work needs SIGUSR1 and the main thread")
    count = 0
    counting = False
    rearm = _Rearm(_SIGNAL)

    def handler(signum: int, frame: Any) -> None:
        nonlocal count
        if counting:
            count += 1
            rearm.now  # noqa: B018 (the property's getter re-arms the signal)

    previous = signal.signal(_SIGNAL, handler)
    try:
        counting = True
        rearm.now  # noqa: B018
        start = count
        call()
        counting = False
        return count - start
    finally:
        counting = False
        signal.signal(_SIGNAL, previous)


def require_counting() -> None:
    """Skips the test when this interpreter does not check signals inside the regex engine (the
    counter would see only Python-level steps): a known-quadratic search must count far more
    than a known-linear one."""
    quadratic, linear = re.compile(r"\d+\d*\s"), re.compile(r"\d+\s")
    text = "1" * 2000
    slow, fast = work(lambda: quadratic.match(text)), work(lambda: linear.match(text))
    if not slow > 20 * max(fast, 1):
        pytest.skip(f"the regex engine's steps are not counted here ({slow} vs {fast})")
