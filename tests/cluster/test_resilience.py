"""Nothing is lost: dropped SSH connections, a restarted slurmctld, hostile input, a wrong host key."""

from __future__ import annotations

import os
import textwrap
import threading
from pathlib import Path

import pytest

from jupyter_tiers.config.profiles import load_config
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.model import JobState, JobStatus, RankPhase
from jupyter_tiers.slurm.tier import SlurmTier
from jupyter_tiers.transport.ssh import HostKeyError
from tests.helpers import drop_connection, wait_for

from .conftest import RANKS_UP, cluster, profile_yaml

pytestmark = pytest.mark.cluster


def test_dropped_connection_mid_stream_loses_and_repeats_no_line(box: SlurmTier) -> None:
    body = textwrap.dedent(
        """\
        import time
        for i in range(600):
            print(f"line {i:04d}", flush=True)
            time.sleep(0.01)
        """
    )
    job = box.submit(box.make_spec(body, name="stream-drop"))
    got: list[str] = []
    drops = 0
    for line in job.follow(timeout=300):
        got.append(line.text)
        if len(got) in (100, 250, 400):
            drop_connection(box.transport)
            drops += 1
    assert drops == 3
    assert got == [f"line {i:04d}" for i in range(600)]


def test_unknown_or_changed_host_key_is_refused(cluster_env: dict[str, str], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = tmp_path / "known_hosts"
    # A valid ed25519 key that is not the server's, listed for the server's address.
    other_key = tmp_path / "other"
    os.system(f"ssh-keygen -q -t ed25519 -N '' -f {other_key}")
    pub = (tmp_path / "other.pub").read_text().split()
    wrong.write_text(f"[{cluster_env['JT_SSH_HOST']}]:{cluster_env['JT_SSH_PORT']} {pub[0]} {pub[1]}\n")
    before = wrong.read_text()
    cfg = tmp_path / "tiers.yaml"
    cfg.write_text(profile_yaml(cluster_env, known_hosts=str(wrong)))
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(cfg))
    tier = SlurmTier(load_config().profile("box"), Registry(tmp_path / "r.sqlite"))
    with pytest.raises(HostKeyError) as err:
        tier.submit(tier.make_spec("print(1)", name="mitm"))
    assert "changed" in str(err.value).lower()
    assert wrong.read_text() == before  # nothing was trusted silently
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    cfg.write_text(profile_yaml(cluster_env, known_hosts=str(empty)))
    tier = SlurmTier(load_config().profile("box"), Registry(tmp_path / "r.sqlite"))
    with pytest.raises(HostKeyError) as err:
        tier.submit(tier.make_spec("print(1)", name="unknown"))
    assert "SHA256:" in str(err.value)
    assert empty.read_text() == ""
    assert tier.registry.list() == []


PAYLOADS = [
    "$(touch {m}-dollar)",
    "`touch {m}-backtick`",
    "x; touch {m}-semicolon",
    "x\ntouch {m}-newline",
    "' ; touch {m}-quote ; '",
    '" ; touch {m}-dquote ; "',
]


def test_injection_payloads_reach_the_job_literally_and_never_execute(box: SlurmTier,
                                                                      tmp_path: Path) -> None:
    marker = f"/tmp/jt-injection-{os.getpid()}"
    values = [p.format(m=marker) for p in PAYLOADS]
    env = tuple((f"PAYLOAD_{i}", v) for i, v in enumerate(values))
    body = textwrap.dedent(
        f"""\
        import os, json
        print(json.dumps([os.environ[f"PAYLOAD_{{i}}"] for i in range({len(values)})]))
        print(json.dumps({values!r}))
        """
    )
    job = box.submit(box.make_spec(body, name="injection", env=env))
    assert job.wait(timeout=120).state is JobState.COMPLETED
    lines = job.logs(rank=0).splitlines()
    import json

    assert json.loads(lines[0]) == values  # env values arrived literally
    assert json.loads(lines[1]) == values  # so did the cell body
    leftovers = [p for p in Path("/tmp").glob(Path(marker).name + "*")]
    assert leftovers == []
    # The env values are not in the registry nor the stored script.
    raw = (tmp_path / "registry.sqlite").read_bytes()
    assert marker.encode() not in raw


@pytest.mark.cluster_disruptive
def test_restarted_slurmctld_is_reported_and_the_final_state_is_right(box: SlurmTier) -> None:
    # The job runs until the test opens its gate after slurmctld is back: with a fixed sleep, a
    # watcher that saw RUNNING late on a busy machine could see the job end before the outage.
    job = box.submit(box.make_spec(
        "import os, time\nprint('working', flush=True)\n"
        "gate = os.path.join(os.environ['JT_JOB_DIR'], 'gate')\n"
        "deadline = time.time() + 300\n"
        "while not os.path.exists(gate) and time.time() < deadline:\n"
        "    time.sleep(0.2)\n"
        "print('done', flush=True)\n",
        name="ctld-restart"))
    seen: list[JobStatus] = []
    ended = threading.Event()
    sub = box.watcher.watch(job.record, on_status=seen.append, on_end=lambda s: ended.set(),
                            follow_logs=False)
    try:
        wait_for(lambda: seen and seen[-1].state is JobState.RUNNING)
        cluster("stop-ctld")
        try:
            wait_for(lambda: any(not s.controller_reachable for s in seen), timeout=120)
        finally:
            cluster("start-ctld")
        box.transport.run(["touch", f"{job.record.jobdir}/gate"], timeout=120)
        assert ended.wait(180)
    finally:
        box.watcher.unwatch(sub)
    unreachable = [s for s in seen if not s.controller_reachable]
    assert "controller" in (unreachable[0].message or "")
    assert seen[-1].state is JobState.COMPLETED
    assert seen[-1].controller_reachable
    assert job.logs(rank=0).split() == ["working", "done"]


def test_torchrun_two_nodes_two_procs_all_reduce(box: SlurmTier) -> None:
    # torch (CPU build) is installed by tests/run.sh; the job's ranks import it on the nodes.
    body = textwrap.dedent(
        """\
        import os, torch, torch.distributed as dist
        dist.init_process_group("gloo")
        t = torch.tensor([float(dist.get_rank())])
        dist.all_reduce(t)
        print(f"rank {dist.get_rank()} of {dist.get_world_size()} sum {t.item()}")
        dist.destroy_process_group()
        """
    )
    job = box.submit(box.make_spec(body, name="ddp", nodes=2, launcher="torchrun", nproc_per_node=2))
    status = job.wait(timeout=300)
    assert status.state is JobState.COMPLETED, job.logs()
    assert [r.phase for r in status.ranks] == [RankPhase.EXITED] * 4
    for rank in range(4):
        assert job.logs(rank=rank).strip() == f"rank {rank} of 4 sum 6.0"


def test_torchrun_failing_rank_is_named_and_the_others_stopped(box: SlurmTier) -> None:
    # Rank 3 fails only once every rank is up (RANKS_UP): a rank started late on a busy machine
    # would otherwise be stopped before it ran and show as waiting, not stopped.
    body = RANKS_UP + textwrap.dedent(
        """\
        import os, sys, time
        rank = int(os.environ["RANK"])
        print(f"rank {rank} local {os.environ['LOCAL_RANK']} up", flush=True)
        if rank == 3:
            all_up()
            time.sleep(2)
            sys.exit(5)
        time.sleep(120)
        """
    )
    job = box.submit(box.make_spec(body, name="ddp-fail", nodes=2, launcher="torchrun",
                                   nproc_per_node=2))
    status = job.wait(timeout=300)
    assert status.state is JobState.FAILED, job.logs()
    first = status.first_failure
    assert first is not None and first.rank == 3 and first.exit_code == 5
    assert [r.phase for r in status.ranks if r.rank != 3] == [RankPhase.STOPPED] * 3
    assert job.logs(rank=2).strip() == "rank 2 local 0 up"
