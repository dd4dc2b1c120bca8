"""Bounded registry chaos: two kernels and the server on one registry file with one kernel
stopped or killed twice (200 jobs + 50 services); then the file damaged three ways."""

from __future__ import annotations

from pathlib import Path

from tests.chaos.scenarios_registry import concurrent, damaged


def test_kernels_and_server_share_the_registry(tmp_path: Path, seed: int) -> None:
    outcome = concurrent(tmp_path, seed=seed, jobs=200, services=50, faults=2)
    assert outcome.faults == 2 and outcome.checked
    assert outcome.clean, (outcome.problems, outcome)


def test_damaged_registry_is_one_clear_line_and_left_as_it_is(tmp_path: Path, seed: int) -> None:
    outcome = damaged(tmp_path, seed=seed)
    assert outcome.faults == 3
    assert outcome.clean, (outcome.problems, outcome)
