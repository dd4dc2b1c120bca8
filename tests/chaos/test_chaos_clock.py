"""Bounded: the wall clock of a kernel and its local job stepped +1 h, back, -1 h, back mid-job
(under libfaketime, never the machine's clock): elapsed times stay sane, no false TIMEOUT."""

from __future__ import annotations

from pathlib import Path

from tests.chaos.scenarios_clock import ClockStepUnavailable, clock_steps
from tests.helpers import loud_skip


def test_wall_clock_stepped_both_ways_mid_job(tmp_path: Path, seed: int) -> None:
    try:
        outcome = clock_steps(tmp_path, seed=seed, steps=4)
    except ClockStepUnavailable as e:
        loud_skip("clock-step chaos test", str(e))
    assert outcome.clean, (outcome.problems, outcome)
    assert outcome.faults == 4 and outcome.checked
