"""The small process helpers both local supervisors share: Wakeup, reap_zombies, detach."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jupyter_tiers.local import processes
from jupyter_tiers.local.wakeup import Wakeup
from tests import helpers

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc")


def test_wakeup_reports_whether_it_was_woken() -> None:
    wakeup = Wakeup()
    os.set_blocking(wakeup.read_fd, False)
    assert wakeup.wait(0) is False
    wakeup.wake()
    wakeup.wake()
    assert wakeup.wait(0) is True  # both bytes drained at once
    assert wakeup.wait(0) is False


def _zombie() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    while pid not in processes.zombie_children():  # bounded by the child's exit, not a clock
        time.sleep(0.01)
    return pid


def test_reap_zombies_leaves_tracked_children() -> None:
    pid = _zombie()
    try:
        processes.reap_zombies({pid})
        assert pid in processes.zombie_children()
        processes.reap_zombies()
        assert pid not in processes.zombie_children()
    finally:
        if pid in processes.zombie_children():
            os.waitpid(pid, 0)


def test_detach_writes_the_child_pid_in_every_directory(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        d.mkdir()
    runner = (
        "import sys, time; from pathlib import Path; from jupyter_tiers.local import processes\n"
        "dirs = [Path(p) for p in sys.argv[1:]]\n"
        "processes.detach(dirs, 'supervisor.pid')\n"
        "import os; seen = [(d / 'supervisor.pid').exists() for d in dirs]\n"  # at once, on return
        "(dirs[0] / 'child.tmp').write_text(f'{os.getpid()} {os.getsid(0)} {all(seen)}')\n"
        "os.replace(dirs[0] / 'child.tmp', dirs[0] / 'child')\n"
    )
    done = subprocess.run([sys.executable, "-c", runner, *map(str, dirs)], timeout=60, check=True)
    assert done.returncode == 0
    lines = [(d / "supervisor.pid").read_text() for d in dirs]
    assert lines[0] == lines[1]
    pid_text, start_text = lines[0].split()
    assert int(pid_text) > 0 and int(start_text) > 0
    # The detached child writes its own pid and session when it runs.
    helpers.wait_for(lambda: (dirs[0] / "child").exists(), "the detached child's pid file")
    child_pid, child_sid, seen = (dirs[0] / "child").read_text().split()
    # The child returns from detach() once the parent wrote the files (it used to run on at
    # once: a child that ended first left no start time, and the line above failed).
    assert seen == "True"
    child_pid, child_sid = int(child_pid), int(child_sid)
    assert child_pid == int(pid_text)
    assert child_sid == child_pid  # a session of its own
    assert not list(tmp_path.glob("*/.supervisor.pid.tmp"))


def test_kill_until_gone_kills_what_it_finds_and_stops_when_none_is_left() -> None:
    child = subprocess.Popen(["sleep", "600"])
    pauses: list[int] = []

    def find() -> list[int]:
        return [child.pid] if child.poll() is None else []

    def pause() -> None:
        pauses.append(child.wait(timeout=60))

    assert processes.kill_until_gone(find, pause, rounds=5) == 1
    assert pauses == [-9]  # SIGKILL, and one round was enough
    assert processes.kill_until_gone(find, pause, rounds=5) == 0


def test_proc_scans_read_stat_past_a_command_name_with_parentheses(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    script = (
        "import pathlib, sys, time\n"
        "pathlib.Path('/proc/self/comm').write_text('x) Z 1 (y')\n"  # a name that looks like fields
        "pathlib.Path(sys.argv[1]).write_text('')\n"
        "time.sleep(600)\n"
    )
    child = subprocess.Popen(["bash", "-c", f'"{sys.executable}" -c "$0" "$1"; true', script, str(ready)])
    try:
        while not ready.exists():
            assert child.poll() is None, "the child ended before it renamed itself"
            time.sleep(0.01)
        below = processes.descendants(os.getpid())
        assert child.pid in below
        grandchild = [pid for pid in below if Path(f"/proc/{pid}/comm").read_text() == "x) Z 1 (y\n"]
        assert len(grandchild) == 1
        assert processes.proc_start_time(grandchild[0]) is not None  # not taken for a zombie
        assert processes.process_alive(grandchild[0], processes.proc_start_time(grandchild[0]))
    finally:
        # Only this test's processes: every descendant of pytest would include other tests'
        # long-lived ones (a session's emulator pods, sshd, object store).
        processes.kill_until_gone(
            lambda: processes.descendants(child.pid) + ([child.pid] if child.poll() is None else []),
            lambda: time.sleep(0.05), 100)
        child.wait(timeout=60)


def test_supervisor_argv_makes_the_directory_absolute(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    assert processes.supervisor_argv("m", "jobdir", ["--detach", "jobs/1"]) == (tmp_path / "jobs" / "1", True)
    assert processes.supervisor_argv("m", "jobdir", ["/x/y"]) == (Path("/x/y"), False)


def test_supervisor_argv_fuzz_gives_a_directory_or_a_usage_exit(capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(20261203)
    words = ["--detach", "-d", "--", "-h", "dir", "a b", "", "--detach=1", "-", "../x", "\x00", "ü"]
    for _ in range(300):
        argv = [rng.choice(words) for _ in range(rng.randint(0, 4))]
        try:
            directory, detached = processes.supervisor_argv("m", "svcdir", argv)
        except SystemExit as exc:
            assert exc.code in (0, 2), argv  # -h prints the help; anything else is a usage error
            continue
        assert directory.is_absolute() and isinstance(detached, bool), argv
        assert detached == ("--detach" in argv[: argv.index("--")] if "--" in argv else "--detach" in argv)
    err = capsys.readouterr().err
    assert "usage: python -m m [-h] [--detach] svcdir" in err
