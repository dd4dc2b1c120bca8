"""Checkpoints a rank writes are readable by the user's group (a serving process running as
another uid of that group); the job's own files stay the user's alone. Same rule as on Slurm
(tests/cluster/test_checkpoint_modes.py)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.model import JobState
from jupyter_tiers.local.tier import LocalTier

from .test_local_tier import FAST, GUARD, local_profile, wait_no_processes

BODY = """\
import os, pathlib
ckpt = pathlib.Path(os.environ["JT_CHECKPOINT_DIR"])
if os.environ["RANK"] == "0":
    (ckpt / "model.pt").write_text("weights")
    (ckpt / "step-1").mkdir()
pathlib.Path("made-by-rank-" + os.environ["RANK"]).write_text("x")
print("saved")
"""


@pytest.fixture
def tier(tmp_path: Path) -> Iterator[LocalTier]:
    old = os.umask(0o022)  # a kernel's usual umask: the modes must not depend on it
    try:
        t = LocalTier(local_profile(tmp_path / "jobs"), Registry(tmp_path / "r.sqlite"),
                      watcher_options=FAST)
        yield t
        t.close()
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_checkpoints_are_group_readable_and_job_files_private(tier: LocalTier) -> None:
    job = tier.submit(tier.make_spec(BODY, name="modes", nodes=1, ntasks_per_node=2,
                                     env=(("TOKEN", "s3cr3t"),)))
    assert job.wait(timeout=GUARD).state is JobState.COMPLETED, job.logs()
    assert wait_no_processes(job.record.jobdir) == []
    jobdir = Path(job.record.jobdir)
    workdir = jobdir.parent
    ckpt = workdir / "modes" / job.id / "checkpoints"
    assert job.status().checkpoint in {str(ckpt / "step-1"), str(ckpt / "model.pt")}

    assert _mode(workdir) == 0o710
    assert _mode(jobdir) == 0o710  # the group may traverse, not list
    job_files = [p for p in jobdir.rglob("*") if not p.name.startswith("made-by-rank-")]
    assert {p.name for p in job_files} >= {"job.sh", "main.py", "env.sh", "rank.sh", "job.log", "ranks", "0"}
    for path in job_files:
        assert _mode(path) & 0o077 == 0, f"{path.name} has mode {_mode(path):o}; job files stay private"
    # What a rank writes: group may read, never write; others nothing.
    assert _mode(jobdir / "made-by-rank-1") == 0o640
    # The checkpoint directory and its parents: group may list and read.
    assert _mode(ckpt) & 0o7777 == 0o2750
    assert _mode(ckpt.parent) == 0o750 and _mode(ckpt.parent.parent) == 0o750
    assert _mode(ckpt / "model.pt") == 0o640
    assert _mode(ckpt / "step-1") & 0o777 == 0o750
