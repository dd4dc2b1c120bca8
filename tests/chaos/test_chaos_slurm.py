"""Bounded Slurm daemon chaos on the shared test cluster (slurm lane; as root, the only tests
that stop its daemons): slurmctld stopped 20 s mid-job, one node's slurmd SIGKILLed mid-job,
slurmdbd stopped during ``%tiers history`` — one of each; and the job directory's disk full on
the cluster side (a tmpfs mounted as the profile's workdir). The controller outage is 20 s here,
60 s in ``bench/chaos.py --full``: what is checked (banner while down, ``%tiers jobs``' one line,
the job's end) is the same after 20 s as after 60 (the watcher's back-off is capped at 30 s,
slurmctld's SlurmctldTimeout of 60 s does not come into it with one controller), and every
second of it is on the slurm lane's critical path and holds up the other cluster tests."""

from __future__ import annotations

import os
import subprocess

import pytest

from jupyter_tiers.slurm.tier import SlurmTier
from tests.chaos.scenarios_slurm import (
    SCRIPT,
    cluster,
    cluster_disk_full,
    ctld_outages,
    dbd_outages,
    slurmd_kills,
)
from tests.helpers import loud_skip

pytestmark = pytest.mark.cluster_disruptive  # its daemons stopped, a node killed, a tmpfs workdir


@pytest.fixture(autouse=True)
def _as_root() -> None:
    if os.geteuid() != 0:
        loud_skip("Slurm daemon chaos tests", "stopping the cluster's daemons needs root")


def test_slurmctld_stopped_mid_job(slurm_tier: SlurmTier, seed: int) -> None:
    outcome = ctld_outages(slurm_tier, seed=seed, outages=1, down_s=20)
    assert outcome.faults == 1 and outcome.checked > 200
    assert outcome.clean, (outcome.problems, outcome)


def test_slurmd_killed_mid_job(slurm_tier: SlurmTier, seed: int) -> None:
    outcome = slurmd_kills(slurm_tier, seed=seed, kills=1)
    assert outcome.faults == 1 and outcome.checked > 10
    assert outcome.clean, (outcome.problems, outcome)


def test_slurmdbd_stopped_during_history(slurm_tier: SlurmTier, seed: int) -> None:
    outcome = dbd_outages(slurm_tier, seed=seed, outages=1)
    assert outcome.faults == 1 and outcome.checked == 3
    assert outcome.clean, (outcome.problems, outcome)


def test_job_directory_disk_full_on_the_cluster(slurm_tier: SlurmTier) -> None:
    """The profile's workdir on a 2 MiB tmpfs on the cluster side: a job filling it is shown
    with one line naming its directory, a submit on it refused with one line naming the workdir."""
    outcome = cluster_disk_full(slurm_tier)
    assert outcome.faults == 2 and outcome.checked == 2
    assert outcome.clean, (outcome.problems, outcome)


def test_node_and_dbd_commands_are_idempotent_and_check_their_argument(slurm_tier: SlurmTier) -> None:
    """start-node / start-dbd on what already runs change nothing; a node that is not one of the
    cluster's, or a stray option, is a usage error (exit 2) naming it."""
    assert "already running" in cluster("start-node", "node1")
    assert "already running" in cluster("start-dbd")
    for argv, words in ((["stop-node", "nodex"], "node name like node2"),
                        (["stop-node", "node99"], "no node node99"),
                        (["stop-node", "node1", "--now"], "unknown option '--now'"),
                        (["start-node"], "one node name")):
        done = subprocess.run(["bash", str(SCRIPT), *argv], capture_output=True, text=True, timeout=120,
                              check=False)
        assert done.returncode == 2 and words in done.stderr, (argv, done.stderr)
