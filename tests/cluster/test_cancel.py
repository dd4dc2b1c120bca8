"""SlurmTier.cancel on the real cluster: a job that has already ended (or that the controller
never knew) is a no-op, and a cancel Slurm refuses (another user's job) is a TiersError naming
the job and scancel's own words, with the job left running."""

from __future__ import annotations

import pwd
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from jupyter_tiers.config.profiles import load_config
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.errors import TiersError
from jupyter_tiers.core.model import JobState
from jupyter_tiers.slurm.tier import SlurmTier
from tests.cluster.conftest import profile_yaml
from tests.cluster.test_lab import lab_students  # noqa: F401 (the teaching-lab users, a fixture)


def test_cancel_of_an_ended_or_unknown_job_is_a_no_op(box: SlurmTier) -> None:
    job = box.submit(box.make_spec("print('done')", name="cancel-ended"))
    assert job.wait(timeout=180).state is JobState.COMPLETED
    box.cancel(job.record)  # "already completed": nothing to do, no error
    box.cancel(job.record)
    box.cancel(replace(job.record, job_id="99999999"))  # "Invalid job id specified"
    assert job.status().state is JobState.COMPLETED


@pytest.fixture
def student_tier(lab_students: dict[str, list[str]], cluster_env: dict[str, str], tmp_path: Path,  # noqa: F811
                 monkeypatch: pytest.MonkeyPatch) -> Iterator[SlurmTier]:
    """A SlurmTier logged in as the lab student jt-student2 (their own lab key)."""
    key = Path(pwd.getpwnam("jt-student2").pw_dir) / ".ssh" / "jupyter_tiers_lab"
    path = tmp_path / "student-tiers.yaml"
    path.write_text(profile_yaml({**cluster_env, "JT_SSH_USER": "jt-student2", "JT_SSH_KEY": str(key)},
                                 name="student2"))
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    tier = SlurmTier(load_config().profile("student2"), Registry(tmp_path / "student.sqlite"))
    yield tier
    tier.close()


def test_a_refused_cancel_is_an_error_and_the_job_goes_on(box: SlurmTier, student_tier: SlurmTier,
                                                         cluster_env: dict[str, str]) -> None:
    job = box.submit(box.make_spec("import time\ntime.sleep(300)\n", name="cancel-refused"))
    with pytest.raises(TiersError) as info:
        student_tier.cancel(job.record)
    message = str(info.value)
    assert message.startswith(f"cannot cancel job {job.id} on student2: scancel: "), message
    assert message.endswith(f"Kill job error on job id {job.id}: Access/permission denied"), message
    # Slurm kept the job: it is still queued or running, as root's.
    alive = subprocess.run(["squeue", "-h", "-j", job.id, "-o", "%u %T"], capture_output=True, text=True,
                           check=True, env={"PATH": "/usr/bin:/bin", "SLURM_CONF": cluster_env["SLURM_CONF"]})
    owner, state = alive.stdout.split()
    assert owner == "root" and state in ("PENDING", "CONFIGURING", "RUNNING")
    box.cancel(job.record)  # its owner may
    assert job.wait(timeout=120).state is JobState.CANCELLED
