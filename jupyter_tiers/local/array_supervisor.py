"""The supervisor of a local job array: ``python -m jupyter_tiers.local.array_supervisor
[--detach] ARRAYDIR``.

The local tier writes one complete job directory per task (``ARRAYDIR/tasks/<i>``: plan, state,
code, ``params.json``) and ``array.json`` (the task indices and the concurrency limit), then starts
this module detached, as it starts a job's supervisor. Like Slurm's ``--array=...%LIMIT``, it runs
the tasks in order, each under its own job supervisor (supervisor.py, so every task has the
environment, fail-stop, cancel and time limit of a job), at most ``limit`` at once. A task
cancelled while it waits (its ``cancel`` file) is started at once, so that its supervisor records
CANCELLED without waiting for a free slot. SIGTERM/SIGINT/SIGHUP cancel every task.

With ``--detach`` the parent writes this process's pid into ``supervisor.pid`` of the array and of
every task, so a task that waits while this process is gone is found lost (jobstate.recover_lost)
instead of staying PENDING for ever.

This module imports only the standard library and small pure modules, to start fast.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .jobstate import CANCEL_FILE, PID_FILE, SUPERVISOR_LOG
from .processes import detach, supervisor_argv

ARRAY_FILE = "array.json"
POLL = 0.05


def task_dirs(arraydir: Path) -> tuple[list[Path], int]:
    """The task directories in order and the concurrency limit, from ``array.json``."""
    plan = json.loads((arraydir / ARRAY_FILE).read_text(encoding="utf-8"))
    dirs = [arraydir / "tasks" / str(int(i)) for i in plan["tasks"]]
    limit = plan.get("limit")
    return dirs, int(limit) if isinstance(limit, int) and limit > 0 else max(1, len(dirs))


def _start(taskdir: Path) -> subprocess.Popen[bytes]:
    log = os.open(taskdir / SUPERVISOR_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        return subprocess.Popen([sys.executable, "-m", "jupyter_tiers.local.supervisor", str(taskdir)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    finally:
        os.close(log)


def run(arraydir: Path) -> int:
    """Run every task to its end, at most the limit at once; see the module docstring."""
    waiting, limit = task_dirs(arraydir)
    stopping: list[int] = []
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: stopping.append(signum))
    running: dict[subprocess.Popen[bytes], Path] = {}
    told: set[subprocess.Popen[bytes]] = set()
    while waiting or running:
        if stopping:
            for taskdir in waiting:
                (taskdir / CANCEL_FILE).write_text(f"{time.time():.6f} {os.getpid()}\n")
            for proc in running:
                if proc not in told:
                    told.add(proc)
                    proc.send_signal(signal.SIGTERM)
        for taskdir in [d for d in waiting if (d / CANCEL_FILE).exists()]:
            waiting.remove(taskdir)  # it ends at once: no need to wait for a free slot
            running[_start(taskdir)] = taskdir
        while waiting and sum(1 for d in running.values() if not (d / CANCEL_FILE).exists()) < limit:
            taskdir = waiting.pop(0)
            running[_start(taskdir)] = taskdir
        for proc in [p for p in running if p.poll() is not None]:
            del running[proc]
        time.sleep(POLL)
    return 0


def main(argv: list[str] | None = None) -> int:
    arraydir, detached = supervisor_argv("jupyter_tiers.local.array_supervisor", "arraydir", argv)
    os.umask(0o077)
    if detached:
        dirs, _limit = task_dirs(arraydir)
        detach([*dirs, arraydir], PID_FILE)  # the array's own last: the tier waits for it
    return run(arraydir)


if __name__ == "__main__":
    sys.exit(main())
