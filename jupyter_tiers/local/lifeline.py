"""A job's lifeline: a process forked from its supervisor at start that waits for the supervisor
to end (the read end of a pipe only the supervisor can write reaches end-of-file however it
ends, SIGKILL and the OOM killer included). If the job's end was not recorded by then, it stops
what is left of the job at once and records FAILED naming the supervisor
(:func:`~.jobstate.recover_lost`): the job's processes never run on unwatched until someone
looks. At a normal end the supervisor stops the lifeline with its other descendants, or the
lifeline finds the end recorded and exits.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from . import jobstate


def start(jobdir: Path) -> int:
    """Fork the lifeline of the calling supervisor; returns the pipe's write end, which the
    supervisor keeps open (not inherited by anything it starts) until it exits."""
    supervisor = os.getpid()
    read_end, write_end = os.pipe()  # both close-on-exec: no rank holds them
    pid = os.fork()
    if pid == 0:  # the lifeline
        status = 0
        try:
            os.close(write_end)
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)
            signal.set_wakeup_fd(-1)
            with contextlib.suppress(OSError):
                os.read(read_end, 1)  # returns when the supervisor is gone
            watch_over(jobdir, supervisor)
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(read_end)
    return write_end


def watch_over(jobdir: Path, supervisor: int) -> bool:
    """The supervisor ``supervisor`` has ended: if the job's end is not recorded, stop the job's
    processes and record it FAILED. Returns whether it had to."""
    state = jobstate.read_state(jobdir)
    if state is None or state.get("state") in jobstate.TERMINAL_STATES:
        return False
    jobstate.recover_lost(jobdir, state, supervisor)
    return True
