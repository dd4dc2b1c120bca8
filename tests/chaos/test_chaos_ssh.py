"""Bounded SSH chaos on the Slurm test cluster (slurm lane; one short job): this process's own SSH
connection cut 10 times while the job's log is followed, client side (ss -K) or server side (its
sshd child SIGKILLed) (any line lost or repeated fails), and cut
once in each of five submits (a job lost or submitted twice fails)."""

from __future__ import annotations

from pathlib import Path

from jupyter_tiers.slurm.tier import SlurmTier
from tests.chaos.scenarios_ssh import SUBMIT_TRIES, download_cuts, log_stream_cuts, submit_cuts, sync_cuts


def test_connection_cut_mid_stream_client_and_server_side(slurm_tier: SlurmTier,
                                                          cluster_env: dict[str, str], seed: int) -> None:
    """Ten cuts, about half of them the sshd child serving this process SIGKILLed."""
    kinds: dict[str, int] = {}
    outcome = log_stream_cuts(slurm_tier, cluster_env["JT_SSH_HOST"], int(cluster_env["JT_SSH_PORT"]),
                              seed=seed, cuts=10, cut_kinds=kinds)
    assert outcome.faults >= 5 and outcome.checked  # the job may end before the tenth cut
    assert outcome.faults + outcome.undelivered == 10, outcome.missed
    assert kinds["server"] >= 1 and kinds["client"] >= 1, kinds
    assert outcome.clean, (outcome.problems, outcome)


def test_connection_cut_mid_submit(slurm_tier: SlurmTier, cluster_env: dict[str, str], seed: int) -> None:
    """Five submits, each one's connection cut at a seeded moment (client side, or its sshd child
    SIGKILLed): one job each, never two. A cut that came after its submit returned is tried again
    on another submit (SUBMIT_TRIES in all), each checked as the others."""
    outcome = submit_cuts(slurm_tier, cluster_env["JT_SSH_HOST"], int(cluster_env["JT_SSH_PORT"]),
                          seed=seed, submits=5, server_share=0.5)
    # 1 uncut + 5 cut, and a submit again for each cut that missed (a cut may still miss them all)
    assert 6 <= outcome.checked <= 1 + 5 * SUBMIT_TRIES and outcome.faults >= 1, outcome
    assert outcome.faults + outcome.undelivered == 5, outcome
    assert outcome.clean, (outcome.problems, outcome)


def test_connection_cut_mid_download(slurm_tier: SlurmTier, cluster_env: dict[str, str], seed: int,
                                     tmp_path: Path) -> None:
    """A 32 MiB file fetched with job.download while the connection is cut up to three times:
    byte-identical (sha256), no .part left, no traceback (paramiko's EOFError once escaped)."""
    outcome = download_cuts(slurm_tier, cluster_env["JT_SSH_HOST"], int(cluster_env["JT_SSH_PORT"]),
                            tmp_path / "dest", seed=seed, cuts=3, megabytes=32)
    assert outcome.checked == 1 and outcome.faults >= 1
    assert outcome.clean, (outcome.problems, outcome)


def test_connection_cut_mid_sync(slurm_tier: SlurmTier, cluster_env: dict[str, str], seed: int,
                                 tmp_path: Path) -> None:
    """Two --sync submits (8 MiB project, a quarter changed each time), each one's connection cut
    at a seeded moment (after two uncut ones, measured): one job each, its snapshot the project
    byte for byte."""
    (tmp_path / "nb").mkdir()
    outcome = sync_cuts(slurm_tier, cluster_env["JT_SSH_HOST"], int(cluster_env["JT_SSH_PORT"]),
                        tmp_path / "nb", seed=seed, submits=2)
    assert outcome.checked == 4 * 40 and outcome.faults >= 1  # 2 uncut first, 2 cut
    assert outcome.faults + outcome.undelivered == 2, outcome
    assert outcome.clean, (outcome.problems, outcome)
