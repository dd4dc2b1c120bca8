"""Issue 41 item 14: dead ends the tool can explain. ``--nodes 40`` on a 32-node partition pended
forever as ``PENDING (PartitionNodeLimit)`` with no word that it can never start; ``--gpus-per-node
1`` on a cluster without GPUs was sbatch's raw ``Invalid generic resource (gres) specification``."""

from __future__ import annotations

import random

import pytest

from jupyter_tiers.app import actions
from jupyter_tiers.app.viewstate.job import status_traits
from jupyter_tiers.batch.pending import NEVER, explained_reason, pending_words, submit_words
from jupyter_tiers.config.registry import JobRecord
from jupyter_tiers.core.model import JobState, JobStatus


@pytest.mark.parametrize("reason", ["PartitionNodeLimit", "PartitionTimeLimit", "DependencyNeverSatisfied",
                                    "BadConstraints", "QOSMaxNodePerJobLimit", "InvalidAccount"])
def test_a_reason_that_never_passes_says_so_with_what_to_change(reason: str) -> None:
    words = pending_words(reason)
    assert words is not None and words.startswith(f"{NEVER}: ")


@pytest.mark.parametrize("reason", ["Resources", "Priority", "JobHeldUser", "ReqNodeNotAvail"])
def test_a_reason_that_passes_is_explained_without_alarm(reason: str) -> None:
    words = pending_words(reason)
    assert words and NEVER not in words


def test_every_view_of_a_pending_job_carries_the_words() -> None:
    status = JobStatus("39", JobState.PENDING, reason="PartitionNodeLimit", world_size=40)
    shown = status_traits(status)["reason"]
    assert shown.startswith("PartitionNodeLimit — can never start as submitted: it asks for more nodes")
    record = JobRecord(profile="box", tier="slurm", job_id="39", name="big", state="PENDING", world_size=40)
    assert actions.item_from(record, status, 0.0).reason == shown
    # Not for a running job, nor for an unknown reason (shown as Slurm says it).
    assert explained_reason("RUNNING", "PartitionNodeLimit") == "PartitionNodeLimit"
    assert explained_reason("PENDING", "SomethingNew") == "SomethingNew"
    assert explained_reason("PENDING", None) == ""


def test_sbatchs_gres_refusal_says_the_cluster_has_no_gpus() -> None:
    err = "sbatch: error: Invalid generic resource (gres) specification"
    assert submit_words(err).startswith("this cluster has no GPUs of that kind")  # type: ignore[union-attr]
    assert submit_words("sbatch: error: Batch job submission failed: Socket timed out") is None


def test_reason_words_fuzz() -> None:
    """Seeded: any text is explained or passed through, one line, never an exception."""
    rng = random.Random(4114)
    alphabet = "PartitionNodeLimitResources \t\n—:()"
    for _ in range(2000):
        reason = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        state = rng.choice(["PENDING", "RUNNING", "REQUEUED", "UNKNOWN"])
        out = explained_reason(state, reason)
        assert out.startswith(reason.strip())
        assert submit_words(reason) is None or "gres" in reason
