"""Issue 10 follow-up on the real cluster: checkpoints a rank writes are readable by the user's
group (a serving pod running as another uid with the user's group as fsGroup or a supplementary
group, or root squashed over NFS), while the job's own files stay the user's alone."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from jupyter_tiers.core.model import JobState
from jupyter_tiers.slurm.tier import SlurmTier

pytestmark = pytest.mark.cluster

BODY = """\
import os, pathlib
ckpt = pathlib.Path(os.environ["JT_CHECKPOINT_DIR"])
if os.environ["RANK"] == "0":
    (ckpt / "model.pt").write_text("weights")
    (ckpt / "step-1").mkdir()
print("saved")
"""


def _ssh(env: dict[str, str], command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    argv = ["ssh", "-i", env["JT_SSH_KEY"], "-o", f"UserKnownHostsFile={env['JT_KNOWN_HOSTS']}",
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-p", env["JT_SSH_PORT"],
            f"{env['JT_SSH_USER']}@{env['JT_SSH_HOST']}", command]
    return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=60)


def test_checkpoint_modes_on_the_cluster(box: SlurmTier, cluster_env: dict[str, str]) -> None:
    job = box.submit(box.make_spec(BODY, name="ckmodes", nodes=2, env=(("TOKEN", "s3cr3t"),)))
    assert job.wait(timeout=180).state is JobState.COMPLETED, job.logs()
    jobdir = job.record.jobdir
    ckpt = f"{jobdir.rsplit('/', 1)[0]}/ckmodes/{job.id}/checkpoints"
    assert job.status().checkpoint == f"{ckpt}/step-1" or job.status().checkpoint == f"{ckpt}/model.pt"
    paths = [jobdir, f"{jobdir}/job.sbatch", f"{jobdir}/env.sh", f"{jobdir}/main.py", f"{jobdir}/job.log",
             f"{jobdir}/ranks", ckpt, f"{ckpt}/model.pt", f"{ckpt}/step-1"]
    out = _ssh(cluster_env, "stat -c '%a' " + " ".join(shlex.quote(p) for p in paths)).stdout.split()
    modes = dict(zip(paths, (int(m, 8) for m in out), strict=True))
    assert modes[jobdir] == 0o710  # the group may traverse, not list
    for name in ("job.sbatch", "env.sh", "main.py", "job.log", "ranks"):
        assert modes[f"{jobdir}/{name}"] & 0o077 == 0, f"{name} has mode {modes[f'{jobdir}/{name}']:o}"
    assert modes[ckpt] == 0o2750  # setgid: what the ranks write keeps the directory's group
    assert modes[f"{ckpt}/model.pt"] == 0o640  # written by rank 0 under umask 027
    assert modes[f"{ckpt}/step-1"] & 0o777 == 0o750

    # Another uid in the job user's group (as a serving pod with that fsGroup) reads the
    # checkpoint but neither lists the job directory nor reads the job's env.sh.
    group = _ssh(cluster_env, "id -g").stdout.strip()
    as_other = f"setpriv --reuid=65534 --regid={group} --clear-groups"
    read = _ssh(cluster_env, f"{as_other} cat {shlex.quote(ckpt)}/model.pt", check=False)
    assert read.returncode == 0 and read.stdout == "weights", read.stderr
    listed = _ssh(cluster_env, f"{as_other} ls {shlex.quote(ckpt)}", check=False)
    assert listed.stdout.split() == ["model.pt", "step-1"], listed.stderr
    for denied in (f"ls {shlex.quote(jobdir)}", f"cat {shlex.quote(jobdir)}/env.sh"):
        result = _ssh(cluster_env, f"{as_other} {denied}", check=False)
        assert result.returncode != 0 and "Permission denied" in result.stderr, (denied, result)
