"""Bounded registry chaos: two kernels and the server on one registry file with one kernel
stopped or killed twice (200 jobs + 50 services); then the file damaged three ways."""

from __future__ import annotations

from pathlib import Path

from tests.chaos.scenarios_registry import concurrent, damaged


def test_kernels_and_server_share_the_registry(tmp_path: Path, seed: int) -> None:
    outcome = concurrent(tmp_path, seed=seed, jobs=200, services=50, faults=2)
    assert outcome.faults == 2 and outcome.checked and not outcome.undelivered, outcome.missed
    assert outcome.clean, (outcome.problems, outcome)


def test_a_kernel_held_stopped_does_not_hold_back_the_other_kernels_fault(tmp_path: Path) -> None:
    """Seed 79: k1 SIGSTOPped 1.6 s at its operation 27, k0 due a SIGSTOP at its operation 31
    (tests/unit/test_chaos_schedules.py checks the plan's shape). Delivered in turn, k0's fault
    found k0 finished and was counted a wrong state (issue 31, seed 4); now each kernel's faults
    come in their own thread and a kernel waits for its release before its last operation."""
    outcome = concurrent(tmp_path, seed=79, jobs=200, services=50, faults=2)
    assert outcome.faults == 2 and not outcome.undelivered, outcome.missed
    assert outcome.clean, (outcome.problems, outcome)


def test_damaged_registry_is_one_clear_line_and_left_as_it_is(tmp_path: Path, seed: int) -> None:
    outcome = damaged(tmp_path, seed=seed)
    assert outcome.faults == 3
    assert outcome.clean, (outcome.problems, outcome)
