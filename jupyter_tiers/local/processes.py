"""Process helpers of the local tiers, read from /proc on Linux.

Whether a pid still is the process it was (start time), the processes a job started (found by the
``JT_JOB_DIR`` marker in their environment) and killing them, the processes below a supervisor,
its children waiting to be reaped, and becoming a child subreaper. Used by the job supervisor,
the service supervisor and the tiers that watch them.

This module imports only the standard library, to start fast.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path

KILL_WAIT = 5.0  # seconds from SIGTERM to SIGKILL (Slurm's KillWait)

_HAVE_PROC = os.path.exists("/proc/self/stat")


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state, ppid, ...); None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return raw.rsplit(b")", 1)[-1].split()  # the name, in parentheses, may hold spaces and ")"


def _proc_parents() -> Iterator[tuple[int, bytes, int]]:
    """(pid, state, parent pid) of every process in /proc; one that ends meanwhile is passed over."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for name in names:
        if not name.isdigit():
            continue
        fields = _stat_fields(name)
        if fields is not None and len(fields) > 1:
            yield int(name), fields[0], int(fields[1])


def proc_start_time(pid: int) -> int | None:
    """Start time (clock ticks since boot) of a live process; None if gone or a zombie."""
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 20 or fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])



def process_alive(pid: int | None, start: int | None = None) -> bool:
    """Whether ``pid`` still runs and (when ``start`` is known) is the same process."""
    if not pid or pid <= 0:
        return False
    if _HAVE_PROC:
        now = proc_start_time(pid)
        return now is not None and (start is None or now == start)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True



def job_processes(jobdir: Path | str) -> list[int]:
    """Live processes started for the job: their environment holds ``JT_JOB_DIR=<jobdir>``."""
    marker = b"JT_JOB_DIR=" + os.fsencode(str(jobdir))
    me = os.getpid()
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    pids = []
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            pids.append(int(name))
    return pids



def kill_until_gone(find: Callable[[], list[int]], pause: Callable[[], None], rounds: int) -> int:
    """SIGKILL every pid ``find()`` returns, ``pause()``, and again until it finds none (at most
    ``rounds`` times); returns how many signals were sent."""
    killed = 0
    for _ in range(rounds):
        pids = find()
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        pause()
    return killed


def kill_job_processes(jobdir: Path | str, rounds: int = 40) -> int:
    """SIGKILL every process of the job until none is left (bounded); returns how many."""
    return kill_until_gone(lambda: job_processes(jobdir), lambda: time.sleep(0.05), rounds)



def descendants(root: int) -> list[int]:
    """Live (not zombie) processes below ``root``: its children, theirs, and so on (/proc)."""
    children: dict[int, list[int]] = {}
    for pid, state, parent in _proc_parents():
        if state not in (b"Z", b"X"):
            children.setdefault(parent, []).append(pid)
    found: list[int] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            found.append(child)
            stack.append(child)
    return found



def zombie_children() -> list[int]:
    """Pids of this process's children that ended and wait to be reaped."""
    me = os.getpid()
    return [pid for pid, state, parent in _proc_parents() if state == b"Z" and parent == me]



def supervisor_argv(module: str, dir_name: str, argv: list[str] | None = None) -> tuple[Path, bool]:
    """Parse a supervisor's command line, ``python -m MODULE [--detach] DIR``: DIR made absolute,
    and whether to ``detach()``. Bad arguments exit with argparse's usage message (status 2)."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}")
    parser.add_argument("--detach", action="store_true",
                        help="fork; the parent records the supervisor's pid and exits at once")
    parser.add_argument(dir_name)
    args = parser.parse_args(argv)
    return Path(os.path.abspath(getattr(args, dir_name))), bool(args.detach)


def detach(pid_dirs: Sequence[Path], pid_file: str) -> None:
    """Fork once more, so the caller (a supervisor's ``--detach``) leaves the kernel's tree.

    The parent writes ``"<pid> <start time>"`` of the child atomically into ``pid_file`` in each
    of ``pid_dirs``, in that order (a tier waiting for the last one then finds them all), and
    exits; the child returns as the leader of a new session, only once the parent has written
    them (until then it cannot end: a child that ended first left its start time unknown).
    """
    hold, release = os.pipe()
    pid = os.fork()
    if pid:
        os.close(hold)
        start = proc_start_time(pid)
        line = f"{pid} {start if start is not None else ''}\n"
        for directory in pid_dirs:
            tmp = directory / f".{pid_file}.tmp"
            tmp.write_text(line)
            os.replace(tmp, directory / pid_file)
        os._exit(0)  # closes ``release``: the child reads its end
    os.close(release)
    with contextlib.suppress(OSError):
        os.read(hold, 1)  # end of file once the parent has exited, whatever became of it
    os.close(hold)
    os.setsid()


def reap_zombies(tracked: Collection[int] = ()) -> None:
    """Reap this process's ended children but those in ``tracked`` (a Popen still waits for them)."""
    for pid in zombie_children():
        if pid not in tracked:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def become_subreaper() -> bool:
    """Linux: adopt the job's orphaned processes (to reap them) instead of leaving them to init."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(36, 1, 0, 0, 0) == 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False

