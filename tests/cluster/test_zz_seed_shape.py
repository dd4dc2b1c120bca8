"""The seed article's shape: 32 nodes x 8 tasks = 256 ranks, one rank fails, fail-stop.

Runs last (file name) because it reshapes the cluster to 32 nodes and back to the default.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator

import pytest

from jupyter_tiers.batch.status import summary_line
from jupyter_tiers.core.model import JobState, RankPhase
from jupyter_tiers.slurm.parse import expand_hostlist
from jupyter_tiers.slurm.tier import SlurmTier

from .conftest import RANKS_UP, cluster

pytestmark = [pytest.mark.cluster, pytest.mark.cluster_disruptive]  # reshaped to 32 nodes and back


@pytest.fixture
def big_cluster(cluster_env: dict[str, str]) -> Iterator[None]:
    cluster("up", "--nodes", "32", "--cpus", "8")
    try:
        yield
    finally:
        cluster("up", "--nodes", cluster_env["JT_CLUSTER_NODES"], "--cpus", cluster_env["JT_CLUSTER_CPUS"])


def test_256_ranks_one_fails_and_is_reported(big_cluster: None, box: SlurmTier) -> None:
    body = RANKS_UP + textwrap.dedent(
        """\
        import os, sys, time
        rank = int(os.environ["RANK"])
        if rank == 137:
            all_up(timeout=300)  # 256 ranks starting on a busy machine
            print("rank 137: NCCL watchdog timeout (simulated)", file=sys.stderr)
            sys.exit(7)
        time.sleep(300)
        """
    )
    spec = box.make_spec(body, name="seed-256", nodes=32, ntasks_per_node=8, switches="2@00:01:00")
    job = box.submit(spec)
    status = job.wait(timeout=600)
    assert status.state is JobState.FAILED
    assert status.world_size == 256 and len(status.ranks) == 256
    first = status.first_failure
    assert first is not None and first.rank == 137 and first.exit_code == 7
    # srun places 8 consecutive ranks per node: rank 137 runs on the 18th node of the job.
    assert first.node == expand_hostlist(status.nodelist or "")[137 // 8]
    stopped = [r for r in status.ranks if r.phase is RankPhase.STOPPED]
    assert len(stopped) == 255
    line = summary_line(status)
    assert f"first failure: rank 137 ({first.node}) exit 7; 255 ranks stopped" in line
