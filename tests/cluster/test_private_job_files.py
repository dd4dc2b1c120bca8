"""Issue 9, finding 3 on the real cluster: a job's files and log are the user's alone (umask 077
at submit and in the script; the directory is 0710 so the group may reach the checkpoints, issue
10), and a job directory that already exists is refused."""

from __future__ import annotations

import secrets
import shlex
import subprocess

import pytest

from jupyter_tiers.core.model import JobState
from jupyter_tiers.slurm import commands
from jupyter_tiers.slurm.render import render_job
from jupyter_tiers.slurm.tier import SlurmTier

pytestmark = pytest.mark.cluster


def _ssh(env: dict[str, str], command: str) -> str:
    argv = ["ssh", "-i", env["JT_SSH_KEY"], "-o", f"UserKnownHostsFile={env['JT_KNOWN_HOSTS']}",
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-p", env["JT_SSH_PORT"],
            f"{env['JT_SSH_USER']}@{env['JT_SSH_HOST']}", command]
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout


def test_job_files_and_log_are_private(box: SlurmTier, cluster_env: dict[str, str]) -> None:
    body = "import pathlib\npathlib.Path('made-by-rank').write_text('x')\nprint('done')\n"
    job = box.submit(box.make_spec(body, name="private", env=(("TOKEN", "s3cr3t"),)))
    assert job.wait(timeout=180).state is JobState.COMPLETED, job.logs()
    jobdir = job.record.jobdir
    listing = _ssh(cluster_env, f"cd {shlex.quote(jobdir)} && stat -c '%a %n' . * ranks/*")
    modes = {name: int(mode, 8) for mode, name in (line.split(" ", 1) for line in listing.splitlines())}
    for name in (".", "ranks", "job.sbatch", "main.py", "env.sh", "rank.sh", "job.log", "made-by-rank"):
        assert name in modes, listing
    assert modes.pop(".") == 0o710  # the group may traverse to the checkpoints, not list
    # The rank runs under umask 027 (checkpoints are group-readable): what it writes is never
    # writable by the group nor open to others.
    assert modes.pop("made-by-rank") == 0o640
    for name, mode in modes.items():
        assert mode & 0o077 == 0, f"{name} has mode {mode:o}; nothing may be open to group or others"


def test_existing_job_directory_is_refused(box: SlurmTier, cluster_env: dict[str, str]) -> None:
    taken = f"{box.profile.workdir}/already-there-{secrets.token_hex(4)}"
    _ssh(cluster_env, f"mkdir -p {shlex.quote(taken)}")  # as if another user had prepared it
    rendered = render_job(box.make_spec("print(1)", name="taken"))
    packed = commands.pack_job(rendered)
    result = box.transport.run(commands.submit_argv(taken, packed), stdin=packed, check=False)
    assert result.exit_status != 0
    assert b"File exists" in result.stderr
    assert _ssh(cluster_env, f"ls -A {shlex.quote(taken)}; rmdir {shlex.quote(taken)}") == ""  # untouched
