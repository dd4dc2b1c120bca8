"""Bounded local-tier chaos: one job's supervisor SIGKILLed mid-job, then reattached."""

from __future__ import annotations

from pathlib import Path

from tests.chaos.scenarios_local import kernel_kills, kernel_kills_mid_rollout, supervisor_kills


def test_supervisor_killed_then_reattached(tmp_path: Path, seed: int) -> None:
    notes: list[str] = []
    outcome = supervisor_kills(tmp_path, seed=seed, kills=1, notes=notes)
    assert outcome.faults == 1 and outcome.checked
    assert outcome.clean, (outcome.problems, outcome)
    print("\n".join(notes))


def test_kernel_killed_mid_job_then_attached(tmp_path: Path, seed: int) -> None:
    outcome = kernel_kills(tmp_path, seed=seed, kills=1)
    assert outcome.faults == 1 and outcome.checked == 600
    assert outcome.clean, (outcome.problems, outcome)


def test_kernel_killed_mid_rollout_then_attached(tmp_path: Path, seed: int) -> None:
    outcome = kernel_kills_mid_rollout(tmp_path, seed=seed, kills=1)
    assert outcome.faults == 1 and outcome.checked == 1
    assert outcome.clean, (outcome.problems, outcome)
