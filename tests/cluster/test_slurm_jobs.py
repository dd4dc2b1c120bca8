"""The Slurm tier against the real cluster over SSH: submit, ranks, logs, fail-stop, cancel."""

from __future__ import annotations

import functools
import textwrap
from pathlib import Path

import pytest

from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.errors import SpecError
from jupyter_tiers.core.model import JobState, RankPhase
from jupyter_tiers.slurm.parse import expand_hostlist
from jupyter_tiers.slurm.tier import SlurmTier
from tests import helpers
from tests.cluster.conftest import RANKS_UP

# In the lane beside the slurm lane (tests/run.sh), sharing the cluster.
pytestmark = [pytest.mark.cluster, pytest.mark.slurm_beside]


# Each poll is a scheduler query: poll every half second.
wait_for = functools.partial(helpers.wait_for, interval=0.5)


def test_two_node_job_completes_with_logs_per_rank(box: SlurmTier) -> None:
    spec = box.make_spec(
        "import os, socket\nprint('hello from', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'])\n",
        name="two-node",
        nodes=2,
    )
    job = box.submit(spec)
    status = job.wait(timeout=180)
    assert status.state is JobState.COMPLETED, job.logs()
    assert len(expand_hostlist(status.nodelist or "")) == 2
    assert [r.phase for r in status.ranks] == [RankPhase.EXITED, RankPhase.EXITED]
    assert {r.node for r in status.ranks} == set(expand_hostlist(status.nodelist or ""))
    assert job.logs(rank=0).strip() == "hello from 0 of 2"
    assert job.logs(rank=1).strip() == "hello from 1 of 2"
    merged = job.logs()
    assert "0: hello from 0 of 2\n" in merged and "1: hello from 1 of 2\n" in merged
    assert job.logs(tail=1) == merged.splitlines(keepends=True)[-1]  # tail read on the cluster
    assert job.logs(tail=0) == ""
    assert box.registry.get(job.id).state == "COMPLETED"


def test_failing_rank_is_named_and_others_are_stopped(box: SlurmTier) -> None:
    body = RANKS_UP + textwrap.dedent(
        """\
        import os, sys, time
        rank = int(os.environ["RANK"])
        print("rank", rank, "up", flush=True)
        if rank == 2:
            all_up()
            print("rank 2 giving up", file=sys.stderr)
            sys.exit(7)
        time.sleep(120)
        """
    )
    job = box.submit(box.make_spec(body, name="fail-stop", nodes=2, ntasks_per_node=2))
    status = job.wait(timeout=180)
    assert status.state is JobState.FAILED
    first = status.first_failure
    assert first is not None and first.rank == 2 and first.exit_code == 7
    others = [r for r in status.ranks if r.rank != 2]
    assert [r.phase for r in others] == [RankPhase.STOPPED] * 3
    assert "rank 2 giving up" in job.logs(rank=2)


def test_cancel_running_job(box: SlurmTier) -> None:
    job = box.submit(box.make_spec("import time\nprint('started', flush=True)\ntime.sleep(300)\n",
                                   name="to-cancel"))
    wait_for(lambda: job.status().state is JobState.RUNNING)
    job.cancel()
    status = job.wait(timeout=120)
    assert status.state is JobState.CANCELLED
    assert all(r.phase is RankPhase.STOPPED for r in status.ranks)


def test_pending_job_reports_reason(box: SlurmTier) -> None:
    job = box.submit(box.make_spec("print('never')", name="held", sbatch_options=("--hold",)))
    status = job.status()
    assert status.state is JobState.PENDING
    assert status.reason == "JobHeldUser"
    job.cancel()
    assert job.wait(timeout=60).state is JobState.CANCELLED


def test_switches_keep_the_job_on_one_leaf(box: SlurmTier, cluster_env: dict[str, str]) -> None:
    nodes = int(cluster_env["JT_CLUSTER_NODES"])
    half = nodes // 2
    leaves = [
        {f"node{i}" for i in range(1, half + 1)},
        {f"node{i}" for i in range(half + 1, nodes + 1)},
    ]
    # Without node2 the nodes it may use (node1, node3, node4) straddle both leaves. (Excluded,
    # not occupied: an exclusive blocker on node2 waited for the other lanes' jobs to leave it.)
    # Wait up to 5 minutes (Slurm's default max_switch_wait) for one leaf: with 1 minute, a
    # node of the free leaf still busy that long (another test's job completing, a node the
    # chaos test set down coming back) would let Slurm place the job across both leaves.
    job = box.submit(box.make_spec("print('placed')", name="switches", nodes=half,
                                   switches="1@00:05:00", sbatch_options=("--exclude=node2",)))
    status = job.wait(timeout=420)
    assert status.state is JobState.COMPLETED
    placed = set(expand_hostlist(status.nodelist or ""))
    assert len(placed) == half and "node2" not in placed
    assert any(placed <= leaf for leaf in leaves), f"{placed} straddles leaf switches"
    assert "#SBATCH --switches=1@00:05:00" in job.script


def test_new_process_can_reattach_from_registry(box: SlurmTier, tmp_path: Path) -> None:
    job = box.submit(box.make_spec("print('reattached ok')", name="reattach"))
    job.wait(timeout=120)
    # A second tier object with its own registry connection, as a restarted kernel would have.
    other = SlurmTier(box.profile, Registry(tmp_path / "registry.sqlite"))
    try:
        again = other.attach(job.id)
        assert again.record.jobdir == job.record.jobdir
        assert again.status().state is JobState.COMPLETED
        assert again.logs(rank=0).strip() == "reattached ok"
    finally:
        other.close()


def test_bad_values_are_rejected_before_anything_runs(box: SlurmTier) -> None:
    for field, value in [("name", "x; touch /tmp/jt-pwned"), ("partition", "debug$(id)"),
                         ("time", "1:00\n#SBATCH --uid=0"), ("mem", "`id`")]:
        with pytest.raises(SpecError) as err:
            box.submit(box.make_spec("print(1)", **{field: value}))
        assert err.value.field == field
    assert box.registry.list() == []


def test_a_rank_that_crashes_is_named_as_the_cause(box: SlurmTier) -> None:
    body = RANKS_UP + ("import os, time\n"
                       "if os.environ['RANK'] == '1':\n    all_up()\n    os.abort()\n"
                       "time.sleep(120)\n")
    job = box.submit(box.make_spec(body, name="crash", nodes=2))
    status = job.wait(timeout=180)
    assert status.state is JobState.FAILED
    first = status.first_failure
    assert first is not None and first.rank == 1 and first.signal == 6
    assert status.ranks[0].phase is RankPhase.STOPPED
    from jupyter_tiers.batch.status import summary_line

    assert f"first failure: rank 1 ({first.node}) killed by SIGABRT (6)" in summary_line(status)
