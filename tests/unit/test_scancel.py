"""scancel's outcome read from its exit status and stderr (pure; the real cluster's answers are
in tests/cluster/test_cancel.py): a refusal is an error naming what scancel said, a job with
nothing left to cancel is a no-op."""

from __future__ import annotations

import random

from jupyter_tiers.slurm.commands import scancel_refusal

DENIED = "scancel: error: Kill job error on job id 1094: Access/permission denied\n"
INVALID = "scancel: error: Kill job error on job id 7: Invalid job id specified\n"


def test_success_and_nothing_to_cancel_are_no_ops() -> None:
    assert scancel_refusal(0, "") is None
    # Slurm 22.05 exits 0 for an ended or unknown job; should a version exit non-zero, still a no-op.
    assert scancel_refusal(0, INVALID) is None
    assert scancel_refusal(1, INVALID) is None
    assert scancel_refusal(
        1, "scancel: error: Kill job error on job id 7: Job/step already completing or completed\n") is None


def test_a_refusal_names_what_scancel_said() -> None:
    assert scancel_refusal(210, DENIED) == "Kill job error on job id 1094: Access/permission denied"
    mixed = DENIED + INVALID
    assert scancel_refusal(1, mixed) == "Kill job error on job id 1094: Access/permission denied"
    assert scancel_refusal(1, "") == "scancel exited with status 1 and said nothing"
    assert scancel_refusal(-1, "") == "scancel exited with status -1 and said nothing"


def test_scancel_refusal_fuzz() -> None:
    """Seeded fuzz: any status and text gives None or one bounded line, and a zero status is
    always a success."""
    rng = random.Random(1094)
    words = ["scancel:", "error:", "Kill job error on job id 12:", "Access/permission denied",
             "Invalid job id specified", "Job/step already completing or completed", "\n", "\r\n",
             "\x00", "é", "x" * 500, " "]
    for _ in range(2000):
        status = rng.choice([0, 1, 210, -1, 255, rng.randint(-5, 300)])
        text = "".join(rng.choice(words) for _ in range(rng.randint(0, 12)))
        got = scancel_refusal(status, text)
        if status == 0:
            assert got is None
        else:
            assert got is None or (isinstance(got, str) and got and "\n" not in got and len(got) <= 1600)
