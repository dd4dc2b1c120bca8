"""Issue 9 on the local tier and the registry: an empty-environment daemon dies on cancel and on
fail-stop, a planted counter symlink is never written through, the workdir must be the user's, one
corrupt state.json does not break listing the others, and the registry file is private."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_tiers.config.profiles import Profile
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.errors import SubmitError, TiersError
from jupyter_tiers.core.model import JobState
from jupyter_tiers.local import jobstate, processes
from jupyter_tiers.local.tier import LocalTier
from tests.helpers import wait_for

GUARD = 120.0  # bounds every wait so a broken tier fails instead of hanging; nothing asserts time
FAST = {"status_interval": 0.5, "rank_interval": 0.2, "first_poll": 0.1}




@pytest.fixture
def tier(tmp_path: Path) -> Iterator[LocalTier]:
    profile = Profile(name="local", tier="local", settings={"workdir": str(tmp_path / "jobs")})
    t = LocalTier(profile, Registry(tmp_path / "registry.sqlite"), watcher_options=FAST)
    yield t
    for rec in t.registry.list(limit=1000):
        t.cancel(rec)
    t.close()


# A rank that starts a daemon the way a careless library does: a new session (setsid) and an
# empty environment (env -i), so no JT_JOB_DIR marks it as the job's.
DAEMON = textwrap.dedent(
    """\
    if [ "$RANK" = 0 ]; then
      setsid env -i /bin/sh -c 'echo $$ > "$1"; exec sleep 300' sh "$JT_JOB_DIR/daemon.pid" \\
        </dev/null >/dev/null 2>&1 &
    fi
    echo ready
    {then}
    """
)


def _daemon(jobdir: str) -> tuple[int, int | None]:
    path = Path(jobdir) / "daemon.pid"
    wait_for(lambda: path.exists() and path.read_text().strip(), "the daemon to write its pid")
    pid = int(path.read_text())
    wait_for(lambda: Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep"), "the daemon's exec")
    return pid, processes.proc_start_time(pid)


@pytest.mark.parametrize("how", ["cancel", "fail-stop"])
def test_empty_environment_daemon_dies_with_the_job(tier: LocalTier, how: str) -> None:
    then = "sleep 300" if how == "cancel" else "sleep 1; exit 3"
    job = tier.submit(tier.make_spec(DAEMON.format(then=then), name="daemon", nodes=1,
                                     ntasks_per_node=2, shell=True))
    pid, start = _daemon(job.record.jobdir)
    try:
        # The environment scan cannot see it: only the subreaper's process tree can.
        assert b"JT_JOB_DIR" not in Path(f"/proc/{pid}/environ").read_bytes()
        assert pid not in processes.job_processes(job.record.jobdir)
        assert os.getsid(pid) == pid  # its own session: no process group of a rank holds it
        if how == "cancel":
            job.cancel()
        status = job.wait(timeout=GUARD)
        assert status.state is (JobState.CANCELLED if how == "cancel" else JobState.FAILED)
        # The terminal state is written after the sweep: the daemon is gone (or a zombie) now.
        assert not processes.process_alive(pid, start)
    finally:
        if processes.process_alive(pid, start):
            os.kill(pid, signal.SIGKILL)


def test_descendants_lists_a_process_tree() -> None:
    import subprocess

    proc = subprocess.Popen(["/bin/sh", "-c", "sleep 30 & sleep 30 & wait"])
    try:
        wait_for(lambda: len(processes.descendants(proc.pid)) == 2, "two grandchildren")
        assert proc.pid in processes.descendants(os.getpid())
    finally:
        for pid in [*processes.descendants(proc.pid), proc.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait()


# --- the job counter and the workdir ------------------------------------------------------------

@pytest.mark.parametrize("planted", [".last-job-id.tmp", ".last-job-id"])
def test_counter_symlink_is_never_written_through(tier: LocalTier, tmp_path: Path, planted: str) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    tier.workdir.mkdir(mode=0o700)
    (tier.workdir / planted).symlink_to(victim)
    job = tier.submit(tier.make_spec("print('ok')", name="counted"))
    assert job.wait(timeout=GUARD).state is JobState.COMPLETED
    assert victim.read_text() == "precious\n"
    assert not (tier.workdir / ".last-job-id").is_symlink()


def test_counter_lock_symlink_is_a_submit_error(tier: LocalTier, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    tier.workdir.mkdir(mode=0o700)
    (tier.workdir / ".last-job-id.lock").symlink_to(victim)
    with pytest.raises(SubmitError, match="next job id"):
        tier.submit(tier.make_spec("print('never')"))
    assert victim.read_text() == "precious\n"


def test_workdir_of_another_user_is_refused(tier: LocalTier) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to give the workdir to another user (chown)")
    tier.workdir.mkdir(mode=0o700)
    os.chown(tier.workdir, 65534, 65534)
    with pytest.raises(SubmitError, match="belongs to uid 65534"):
        tier.submit(tier.make_spec("print('never')"))


def test_group_writable_workdir_is_refused(tier: LocalTier) -> None:
    tier.workdir.mkdir()
    tier.workdir.chmod(0o777)
    with pytest.raises(SubmitError, match="writable by group or others"):
        tier.submit(tier.make_spec("print('never')"))


# --- corrupt state.json ---------------------------------------------------------------------

CORRUPT = [
    '{"state": 5, "pid": "x", "start_time": "y", "end_time": [1], "nodelist": {"a": 1}}',
    '{"state": "RUNNING", "pid": 1000000000000000000000000000, "pid_start": "z"}',
    '{"state": "COMPLETED", "start_time": Infinity, "end_time": NaN, "exit_code": 1e400}',
    '{"state": "COMPLETED", "start_time": -1e300, "end_time": 1e300, "reason": 7}',
    "[1, 2, 3]", "not json", "", '{"state": "RUNNING", "pid": -5}', "[" * 100000,
]


@pytest.mark.parametrize("text", CORRUPT)
def test_one_corrupt_state_json_does_not_break_the_listing(tier: LocalTier, text: str) -> None:
    good = tier.submit(tier.make_spec("print('good')", name="good"))
    bad = tier.submit(tier.make_spec("print('bad')", name="bad"))
    assert good.wait(timeout=GUARD).state is JobState.COMPLETED
    assert bad.wait(timeout=GUARD).state is JobState.COMPLETED
    Path(bad.record.jobdir, jobstate.STATE_FILE).write_text(text)
    infos = tier.poll_scheduler(tier.registry.list())
    assert infos[good.id].state is JobState.COMPLETED
    if bad.id in infos:
        assert isinstance(infos[bad.id].state, JobState)
    bad.status()  # no exception either
    from jupyter_tiers.faces.tiers_command import format_jobs

    assert "good" in format_jobs(tier.registry.list())


def test_read_state_drops_wrong_types(tmp_path: Path) -> None:
    (tmp_path / jobstate.STATE_FILE).write_text(json.dumps(
        {"state": "RUNNING", "pid": "12", "start_time": 5.0, "extra": {"kept": True}, "exit_code": True}))
    assert jobstate.read_state(tmp_path) == {"state": "RUNNING", "start_time": 5.0, "extra": {"kept": True}}


# --- the registry -------------------------------------------------------------------------------

def test_registry_is_private_and_refuses_a_symlink(tmp_path: Path) -> None:
    path = tmp_path / "data" / "registry.sqlite"
    Registry(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    path.chmod(0o644)  # a registry written by an older version
    Registry(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    link = tmp_path / "link.sqlite"
    link.symlink_to(victim)
    with pytest.raises(TiersError, match="symlink"):
        Registry(link)
    assert victim.read_text() == "precious\n"


def test_registry_list_takes_any_limit(tmp_path: Path) -> None:
    registry = Registry(tmp_path / "r.sqlite")
    assert registry.list(limit=10**20) == []
    assert registry.list(limit=-5) == []


def test_tilde_python_runs_locally(tier: LocalTier, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    home = tmp_path / "home"
    (home / "venv" / "bin").mkdir(parents=True)
    (home / "venv" / "bin" / "python").symlink_to(sys.executable)
    monkeypatch.setenv("HOME", str(home))
    job = tier.submit(tier.make_spec("print('tilde ok')", name="tilde", python="~/venv/bin/python"))
    assert job.wait(timeout=GUARD).state is JobState.COMPLETED, job.logs()
    assert "tilde ok" in job.logs()
