"""Bounded local-tier chaos: one job's supervisor SIGKILLed mid-job, then reattached."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos.scenarios_local import disk_full, kernel_kills, kernel_kills_mid_rollout, supervisor_kills
from tests.helpers import loud_skip


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


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs mounted for the test (root only), unmounted after it."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0:
        loud_skip("disk-full chaos test", "mounting a small tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(disk)],
                             capture_output=True, text=True, timeout=60, check=False)
    if mounted.returncode != 0:
        loud_skip("disk-full chaos test", f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True, timeout=60, check=False)


def test_workdir_disk_full(small_disk: Path, tmp_path: Path) -> None:
    outcome = disk_full(small_disk, tmp_path / "registry.sqlite")
    assert outcome.faults == 2 and outcome.checked > 2
    assert outcome.clean, (outcome.problems, outcome)
