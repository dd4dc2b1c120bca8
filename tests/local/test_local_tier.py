"""The local tier for real: supervisor, rank shim and ranks are real processes; nothing is mocked.

Waits are bounded (GUARD) only so a broken tier fails instead of hanging; no assertion is on time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_tiers.api import make_tier
from jupyter_tiers.batch.status import summary_line
from jupyter_tiers.config.profiles import Profile
from jupyter_tiers.config.registry import JobRecord, Registry
from jupyter_tiers.core.errors import SpecError
from jupyter_tiers.core.model import JobState, LogLine, RankPhase
from jupyter_tiers.local import processes, slurmenv
from jupyter_tiers.local.tier import LocalTier
from tests.helpers import local_profile, loud_skip, processes_mentioning, wait_for

FAST = {"status_interval": 0.5, "rank_interval": 0.2, "first_poll": 0.1}
GUARD = 120.0  # seconds; bounds every wait so a broken tier fails instead of hanging


def wait_no_processes(jobdir: str, timeout: float = GUARD) -> list[tuple[int, str]]:
    """Wait (bounded) until no process of the job is left; returns what is left then."""
    deadline = time.monotonic() + timeout
    left = processes_mentioning(jobdir)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = processes_mentioning(jobdir)
    return left


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path / "jobs"


@pytest.fixture
def registry_path(tmp_path: Path) -> Path:
    return tmp_path / "registry.sqlite"


@pytest.fixture
def tier(workdir: Path, registry_path: Path) -> Iterator[LocalTier]:
    t = LocalTier(local_profile(workdir), Registry(registry_path), watcher_options=FAST)
    yield t
    # Leave no job of this test behind.
    records = t.registry.list(limit=1000)
    for rec in records:
        t.cancel(rec)
    t.close()
    for rec in records:
        assert wait_no_processes(rec.jobdir) == []


ENV_PROBE = textwrap.dedent(
    """\
    import os
    names = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SLURM_PROCID", "SLURM_NODEID",
             "SLURM_LOCALID", "SLURM_NTASKS", "SLURMD_NODENAME", "SLURM_JOB_NODELIST", "SLURM_JOB_ID",
             "MASTER_ADDR", "JT_JOB_DIR", "PYTHONUNBUFFERED", "GREETING"]
    print(" ".join(f"{n}={os.environ.get(n)}" for n in names))
    print("port", os.environ["MASTER_PORT"], "cwd", os.getcwd())
    print("done")
    """
)


def _ready_count(job: object, word: str = "ready") -> int:
    return sum(1 for ln in job.logs().splitlines() if ln.endswith(f": {word}"))  # type: ignore[attr-defined]


def test_2x2_job_completes_with_slurm_env_and_exact_rank_logs(tier: LocalTier) -> None:
    spec = tier.make_spec(
        ENV_PROBE, name="probe", nodes=2, ntasks_per_node=2, env={"GREETING": "hello world"},
        setup=["echo setup says hi"],
    )
    job = tier.submit(spec)
    assert job.record.tier == "local"
    assert job.id.isdigit()
    status = job.wait(timeout=GUARD)
    assert status.state is JobState.COMPLETED, job.logs()
    assert status.nodelist == "local[0-1]"
    assert [r.phase for r in status.ranks] == [RankPhase.EXITED] * 4
    assert [r.node for r in status.ranks] == ["local0", "local0", "local1", "local1"]
    assert summary_line(status).startswith(f"job {job.id} COMPLETED in ")
    assert summary_line(status).endswith(" on local[0-1]")

    jobdir = job.record.jobdir
    port = json.loads(Path(jobdir, "state.json").read_text())["master_port"]
    for rank in range(4):
        node, local = divmod(rank, 2)
        expected = [
            f"RANK={rank} WORLD_SIZE=4 LOCAL_RANK={local} LOCAL_WORLD_SIZE=2 SLURM_PROCID={rank}"
            f" SLURM_NODEID={node} SLURM_LOCALID={local} SLURM_NTASKS=4 SLURMD_NODENAME=local{node}"
            f" SLURM_JOB_NODELIST=local[0-1] SLURM_JOB_ID={job.id} MASTER_ADDR=127.0.0.1"
            f" JT_JOB_DIR={jobdir} PYTHONUNBUFFERED=1 GREETING=hello world",
            f"port {port} cwd {jobdir}",
            "done",
        ]
        assert job.logs(rank=rank).splitlines() == expected
        assert [ln.text for ln in tier.rank_log(job.record, rank, tail=1)] == ["done"]
    # The setup ran once, unprefixed, like a Slurm batch script's own output.
    assert job.logs().splitlines().count("setup says hi") == 1
    # The registry and the script hold no env value.
    rec = tier.registry.get(job.key)
    assert rec.state == "COMPLETED"
    assert "hello world" not in rec.script and "GREETING" in rec.script
    assert ["GREETING", None] in rec.spec["env"]
    assert (Path(jobdir) / "env.sh").stat().st_mode & 0o777 == 0o600
    assert wait_no_processes(jobdir) == []

    # Ids come from a counter: the next job gets the next integer.
    second = tier.submit(tier.make_spec("print('again')", name="again"))
    assert int(second.id) == int(job.id) + 1
    assert second.wait(timeout=GUARD).state is JobState.COMPLETED
    assert second.logs() == "0: again\n"


def test_torch_gloo_all_reduce_across_two_ranks(tier: LocalTier) -> None:
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        reason = f"torch is not installed ({exc}); the gloo all_reduce test needs it"
        loud_skip("torch test", reason, fail_in_ci=False)
    body = textwrap.dedent(
        """\
        import torch
        import torch.distributed as dist
        dist.init_process_group("gloo")  # env:// from RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
        t = torch.tensor([float(dist.get_rank() + 1)])
        dist.all_reduce(t)
        print(f"sum={t.item():g} world={dist.get_world_size()}")
        dist.destroy_process_group()
        """
    )
    srun = tier.submit(tier.make_spec(body, name="gloo-srun", nodes=2, ntasks_per_node=1))
    torchrun = tier.submit(
        tier.make_spec(body, name="gloo-torchrun", nodes=1, launcher="torchrun", nproc_per_node=2)
    )
    for job in (srun, torchrun):
        status = job.wait(timeout=300)
        assert status.state is JobState.COMPLETED, job.logs()
        for rank in (0, 1):
            assert job.logs(rank=rank).splitlines()[-1] == "sum=3 world=2", job.logs()


def test_torchrun_launcher_sets_torchrun_env_and_one_slurm_task_per_node(tier: LocalTier) -> None:
    body = textwrap.dedent(
        """\
        import os
        keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "SLURM_PROCID", "SLURM_NTASKS",
                "SLURM_LOCALID", "TORCHELASTIC_RESTART_COUNT"]
        print(" ".join(os.environ.get(k, "-") for k in keys))
        """
    )
    job = tier.submit(tier.make_spec(body, nodes=2, launcher="torchrun", nproc_per_node=2))
    assert job.wait(timeout=GUARD).state is JobState.COMPLETED, job.logs()
    got = {r: job.logs(rank=r).strip() for r in range(4)}
    assert got == {
        0: "0 0 4 0 0 2 0 0",
        1: "1 1 4 0 0 2 0 0",
        2: "2 0 4 1 1 2 0 0",
        3: "3 1 4 1 1 2 0 0",
    }


def test_fail_stop_names_the_failing_rank_and_stops_the_others(tier: LocalTier) -> None:
    body = textwrap.dedent(
        """\
        import os, sys, time
        rank = int(os.environ["RANK"])
        print("ready", flush=True)
        if rank == 1:
            go = os.path.join(os.environ["JT_JOB_DIR"], "go")
            while not os.path.exists(go):
                time.sleep(0.05)
            print("giving up", file=sys.stderr)
            sys.exit(7)
        time.sleep(300)
        """
    )
    job = tier.submit(tier.make_spec(body, name="failstop", nodes=2, ntasks_per_node=2))
    wait_for(lambda: _ready_count(job) == 4, "every rank to start")
    Path(job.record.jobdir, "go").touch()  # rank 1 fails only once all ranks run
    status = job.wait(timeout=GUARD)
    assert status.state is JobState.FAILED
    first = status.first_failure
    assert first is not None and (first.rank, first.exit_code, first.node) == (1, 7, "local0")
    others = [r for r in status.ranks if r.rank != 1]
    assert [r.phase for r in others] == [RankPhase.STOPPED] * 3
    assert all(r.signal == 15 for r in others)
    assert summary_line(status).endswith("— first failure: rank 1 (local0) exit 7; 3 ranks stopped")
    assert status.exit_code == 7
    assert job.logs(rank=1).splitlines() == ["ready", "giving up"]
    log = job.logs()
    assert "jupyter-tiers: rank 1 (local0) exited with code 7: stopping the other ranks\n" in log
    assert wait_no_processes(job.record.jobdir) == []


def test_cancel_stops_every_rank_even_one_ignoring_sigterm(tier: LocalTier) -> None:
    body = textwrap.dedent(
        """\
        if [ "$RANK" = 3 ]; then trap '' TERM; fi   # this rank needs the SIGKILL after the wait
        echo ready
        sleep 300 &
        wait
        """
    )
    job = tier.submit(tier.make_spec(body, name="cancel-me", nodes=2, ntasks_per_node=2, shell=True))
    wait_for(lambda: _ready_count(job) == 4, "every rank to start")
    jobdir = job.record.jobdir
    assert len(processes.job_processes(jobdir)) >= 4 * 3  # each rank: shim, prefixer, heartbeat, program...
    job.cancel()
    status = job.wait(timeout=GUARD)
    assert status.state is JobState.CANCELLED
    assert all(r.phase is RankPhase.STOPPED for r in status.ranks), status.ranks
    assert summary_line(status).endswith("— 4 ranks stopped")
    assert f"jupyter-tiers: job {job.id} CANCELLED at " in job.logs()
    # The final state is written after the sweep: nothing of the job runs but the exiting supervisor.
    assert processes.job_processes(jobdir) == []
    assert wait_no_processes(jobdir) == []
    job.cancel()  # no error once ended


def test_cancel_before_the_ranks_start(tier: LocalTier) -> None:
    job = tier.submit(tier.make_spec("print('never')", setup=["sleep 300"]))
    wait_for(lambda: job.status().state is JobState.RUNNING, "the batch step to run")
    job.cancel()
    status = job.wait(timeout=GUARD)
    assert status.state is JobState.CANCELLED
    assert "never" not in job.logs()
    assert wait_no_processes(job.record.jobdir) == []


def test_job_survives_the_kernel_and_a_new_tier_attaches(
    workdir: Path, registry_path: Path, tmp_path: Path
) -> None:
    kernel = textwrap.dedent(
        f"""\
        import os, signal, sys
        from jupyter_tiers.config.profiles import Profile
        from jupyter_tiers.local.tier import LocalTier
        from jupyter_tiers.config.registry import Registry
        tier = LocalTier(Profile("local", "local", settings={{"workdir": {str(workdir)!r}}}),
                         Registry({str(registry_path)!r}))
        body = (
            "import os, time\\n"
            "print('started', flush=True)\\n"
            "while not os.path.exists(os.path.join(os.environ['JT_JOB_DIR'], 'go')):\\n"
            "    time.sleep(0.05)\\n"
            "print('finished')\\n"
        )
        job = tier.submit(tier.make_spec(body, name="survivor", nodes=2))
        job.status()
        print(job.id, flush=True)
        os.killpg(0, signal.SIGKILL)  # the kernel dies with its whole process group
        """
    )
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-c", kernel], cwd=root, capture_output=True, text=True, timeout=GUARD,
        start_new_session=True,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    job_id = proc.stdout.strip()
    assert job_id.isdigit(), proc.stderr

    tier = LocalTier(local_profile(workdir), Registry(registry_path), watcher_options=FAST)
    try:
        job = tier.attach(job_id)
        wait_for(lambda: _ready_count(job, "started") == 2, "both ranks to run")
        assert job.status().state is JobState.RUNNING
        Path(job.record.jobdir, "go").touch()
        status = job.wait(timeout=GUARD)
        assert status.state is JobState.COMPLETED, job.logs()
        assert tier.registry.get(job.key).state == "COMPLETED"
        assert job.logs(rank=1).splitlines() == ["started", "finished"]
        assert wait_no_processes(job.record.jobdir) == []
    finally:
        for rec in tier.registry.list():
            tier.cancel(rec)
        tier.close()


def test_follow_yields_lines_until_the_end(tier: LocalTier) -> None:
    body = textwrap.dedent(
        """\
        import os
        rank = int(os.environ["RANK"])
        for i in range(50):
            print(f"line {i} of rank {rank}")
        """
    )
    job = tier.submit(tier.make_spec(body, nodes=1, ntasks_per_node=2, setup=["echo from setup"]))
    lines = list(job.follow(timeout=GUARD))
    got = [(ln.rank, ln.text) for ln in lines]
    assert (None, "from setup") in got
    for rank in (0, 1):
        assert [t for r, t in got if r == rank] == [f"line {i} of rank {rank}" for i in range(50)]
    assert len(got) == 101
    assert lines[-1].end_offset == len(Path(job.record.jobdir, "job.log").read_bytes())
    # Resuming from an offset gives the rest, without repeats.
    middle = lines[40].end_offset
    rest = list(job.follow(offset=middle, timeout=GUARD))
    assert [(ln.rank, ln.text) for ln in rest] == got[41:]


def test_open_log_stops_promptly_on_close(tier: LocalTier) -> None:
    job = tier.submit(tier.make_spec("print('one line')"))
    job.wait(timeout=GUARD)
    stream = tier.open_log(job.record, 0)
    chunks = []
    for chunk in stream:  # the stream never ends by itself: the watcher closes it
        chunks.append(chunk)
        stream.close()
    assert b"".join(chunks) == b"0: one line\n"
    assert tier.read_log(job.record, 3) == b"one line\n"


def test_setup_failure_fails_the_job_before_any_rank(tier: LocalTier) -> None:
    job = tier.submit(tier.make_spec("print('never')", setup=["echo broken setup", "exit 3"]))
    status = job.wait(timeout=GUARD)
    assert status.state is JobState.FAILED
    assert status.exit_code == 3
    assert summary_line(status).endswith("— exit 3 before any rank ran (see the log)")
    assert job.logs().splitlines()[0] == "broken setup"


def test_time_limit_ends_the_job_as_timeout(tier: LocalTier) -> None:
    job = tier.submit(tier.make_spec("sleep 300", shell=True, time="0:01"))  # MM:SS
    status = job.wait(timeout=GUARD)
    assert status.state is JobState.TIMEOUT
    assert status.ranks[0].phase is RankPhase.STOPPED
    assert summary_line(status).endswith("reason: TimeLimit")
    assert wait_no_processes(job.record.jobdir) == []


def test_a_dead_supervisor_is_reported_and_its_ranks_stopped(tier: LocalTier) -> None:
    job = tier.submit(tier.make_spec("echo ready; sleep 300", shell=True, nodes=2))
    wait_for(lambda: _ready_count(job) == 2, "both ranks to start")
    state = json.loads(Path(job.record.jobdir, "state.json").read_text())
    os.kill(state["pid"], signal.SIGKILL)
    wait_for(lambda: not processes.process_alive(state["pid"], state["pid_start"]), "the supervisor to die")
    status = job.status()
    assert status.state is JobState.FAILED
    assert status.reason is not None and "ended without recording the job's end" in status.reason
    assert wait_no_processes(job.record.jobdir) == []


def test_dry_run_plan_and_limits(tier: LocalTier) -> None:
    spec = tier.make_spec(
        "print(1)", nodes=2, ntasks_per_node=3, env={"TOKEN": "s3cret"}, partition="gpu",
        gpus_per_node=8, setup=["module load cuda"],
    )
    plan = tier.render(spec)
    assert "2 emulated nodes (local[0-1]) x 3 ranks = 6 ranks" in plan
    assert 'bash rank.sh python3 "$JT_JOB_DIR/main.py"' in plan
    assert "SLURM_PROCID" in plan and "MASTER_ADDR=127.0.0.1" in plan
    assert "TOKEN" in plan and "s3cret" not in plan
    assert "Not applied locally: gpus_per_node=8, partition=gpu" in plan
    assert plan.rstrip().endswith("module load cuda")
    with pytest.raises(SpecError, match="at most 1024 ranks"):
        tier.render(tier.make_spec("x", nodes=100, ntasks_per_node=100))
    with pytest.raises(SpecError, match="name"):
        tier.render(tier.make_spec("x", name="bad name"))
    assert tier.registry.list() == []


def test_make_tier_and_default_workdir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    t = make_tier(Profile(name="local", tier="local"))
    assert isinstance(t, LocalTier)
    assert t.workdir == tmp_path / "data" / "tiers" / "local-jobs"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert LocalTier(local_profile(Path("~/jobs"))).workdir == tmp_path / "home" / "jobs"


def test_no_process_of_a_finished_job_is_left(tier: LocalTier) -> None:
    # A stray background process of a rank is killed at the end, as Slurm's cgroup cleanup does.
    job = tier.submit(tier.make_spec("sleep 300 >/dev/null 2>&1 &\necho started", shell=True))
    status = job.wait(timeout=GUARD)
    assert status.state is JobState.COMPLETED
    assert job.logs() == "0: started\n"
    assert processes.job_processes(job.record.jobdir) == []  # swept before the final state was written
    assert wait_no_processes(job.record.jobdir) == []


def test_pure_helpers() -> None:
    limits = ("10", "1:30", "01:00:05", "2-03", "1-00:01", "0-0:0:9", "0")
    assert [slurmenv.parse_time_limit(t) for t in limits] == [
        600.0, 90.0, 3605.0, 183600.0, 86460.0, 9.0, None]
    assert (slurmenv.nodelist(1), slurmenv.nodelist(3)) == ("local0", "local[0-2]")
    env = slurmenv.clean_env({"SLURM_JOB_ID": "9", "RANK": "3", "JT_JOB_DIR": "/x", "JT_HEARTBEAT": "1",
                        "MPLBACKEND": "module://matplotlib_inline.backend_inline", "HOME": "/h"})
    assert env == {"JT_HEARTBEAT": "1", "HOME": "/h"}


def test_parse_rank_file_agrees_with_the_slurm_query_parser() -> None:
    from jupyter_tiers.batch.jobdir import parse_rank_file, parse_rank_files

    text = "start 10.5 local1\nexit 7 12.25\nstart 20.0 local0\nsignal 15 21.0\n"
    query = "@@ /j\n" + "".join(f"/j/ranks/4:{ln}\n" for ln in text.splitlines()) + "% 4 30.0\n"
    assert parse_rank_file(4, text, heartbeat_at=30.0) == parse_rank_files(query)["/j"][4]
    state = parse_rank_file(4, text + "exit 0")  # a torn last line is ignored
    assert (state.phase, state.signal, state.node) == (RankPhase.STOPPED, 15, "local0")


class _CountingTier(LocalTier):
    """A real LocalTier that counts full-log reads (what a stopped follower must not do)."""

    read_calls = 0

    def read_log(self, record: JobRecord, offset: int = 0) -> bytes:
        self.read_calls += 1
        return super().read_log(record, offset)


def test_a_stopped_follower_does_not_read_the_rest_of_the_log(
    workdir: Path, registry_path: Path
) -> None:
    tier = _CountingTier(local_profile(workdir), Registry(registry_path), watcher_options=FAST)
    try:
        job = tier.submit(tier.make_spec("echo first; sleep 300", shell=True))
        lines: list[LogLine] = []
        sub = tier.watcher.watch(job.record, on_lines=lines.extend)
        wait_for(lambda: bool(lines), "the first line")
        tier.watcher.unwatch(sub)  # the listener went away while the job runs
        assert sub.follower is not None
        sub.follower._thread.join(GUARD)
        assert not sub.follower._thread.is_alive()
        assert tier.read_calls == 0
        assert [ln.text for ln in lines] == ["first"]
    finally:
        for rec in tier.registry.list():
            tier.cancel(rec)
        tier.close()
        for rec in tier.registry.list():
            assert wait_no_processes(rec.jobdir) == []


def test_python3_is_the_kernels_interpreter_even_behind_another_on_path(
    tier: LocalTier, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoy = tmp_path / "decoy-bin"
    decoy.mkdir()
    (decoy / "python3").write_text("#!/bin/sh\necho decoy python\n")
    (decoy / "python3").chmod(0o755)
    bindir = os.path.dirname(sys.executable)
    monkeypatch.setenv("PATH", os.pathsep.join([str(decoy), bindir, os.environ["PATH"]]))
    job = tier.submit(tier.make_spec("import sys; print(sys.executable)", name="which-python"))
    assert job.wait(timeout=GUARD).state is JobState.COMPLETED
    assert os.path.dirname(job.logs(rank=0).strip()) == bindir


def _nobody() -> int:
    import pwd

    if os.geteuid() != 0:
        loud_skip("another user's workdir", "chown to nobody needs root")
    return pwd.getpwnam("nobody").pw_uid


def test_a_symlinked_or_foreign_workdir_is_refused_unfollowed(tmp_path: Path, registry_path: Path) -> None:
    """The workdir is checked with lstat (issue 20 item 13): a symlink to a directory of the
    user's own is refused, not followed (and nothing is written at its target); a directory
    that another uid owns is refused even with a safe mode."""
    from jupyter_tiers.core.errors import SubmitError

    target = tmp_path / "target"
    target.mkdir(mode=0o700)
    link = tmp_path / "linked"
    link.symlink_to(target)
    tier = LocalTier(local_profile(link), Registry(registry_path), watcher_options=FAST)
    try:
        with pytest.raises(SubmitError, match=r"the local workdir .*linked is a symlink"):
            tier.submit(tier.make_spec("print('hi')\n", name="linked"))
        assert list(target.iterdir()) == [] and target.stat().st_mode & 0o777 == 0o700
    finally:
        tier.close()
    foreign = tmp_path / "foreign"
    foreign.mkdir(mode=0o700)
    os.chown(foreign, _nobody(), -1)
    tier = LocalTier(local_profile(foreign), Registry(registry_path), watcher_options=FAST)
    try:
        with pytest.raises(SubmitError, match=r"the local workdir .*foreign belongs to uid \d+, not to you"):
            tier.submit(tier.make_spec("print('hi')\n", name="foreign"))
        assert list(foreign.iterdir()) == []
    finally:
        tier.close()
