"""A login environment full of Slurm variables changes nothing the tool shows and nothing it
submits (issue 25), on the real test cluster.

The tier's commands run in an environment that exports what users' shells and site modules do:
SQUEUE_FORMAT/SQUEUE_FORMAT2/SQUEUE_SORT, SACCT_FORMAT, SINFO_FORMAT, SLURM_TIME_FORMAT=relative,
SQUEUE_USERS (hides every job of ours from a plain squeue), SCANCEL_STATE=RUNNING (makes scancel of
a pending job a silent no-op), SBATCH_TIMELIMIT/SBATCH_PARTITION/SBATCH_JOB_NAME (beat #SBATCH
lines), and SBATCH_DELAY_BOOT, an option the job does not set (as a site's SBATCH_ACCOUNT), which
must still apply.

Transports are made by a factory (``TRANSPORTS``): ``login-env`` runs each command as the login
node would, with local bash and the real Slurm clients under that environment; ``ssh`` goes
through the real sshd and starts each command under ``env VAR=...``, as a login shell exporting
them would. Both scope the environment to this test's own commands (no ~/.bashrc is edited), so
other tests running at the same time never see it. The on-cluster (local) transport joins the
list the same way; the assertions do not change.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers.config.profiles import Profile
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.model import JobState
from jupyter_tiers.slurm.tier import SlurmTier, transport_for
from jupyter_tiers.transport.exchange import CommandResult

pytestmark = pytest.mark.usefixtures("cluster_env")

HOSTILE = {
    "SQUEUE_FORMAT": "%i %j", "SQUEUE_FORMAT2": "jobid,name", "SQUEUE_SORT": "-i",
    "SQUEUE_USERS": "nobody", "SQUEUE_PARTITION": "preemptible", "SACCT_FORMAT": "jobid",
    "SINFO_FORMAT": "%P", "SLURM_TIME_FORMAT": "relative", "SCANCEL_STATE": "RUNNING",
    "SBATCH_TIMELIMIT": "00:01:00", "SBATCH_PARTITION": "preemptible", "SBATCH_JOB_NAME": "hijacked",
    "SBATCH_DELAY_BOOT": "7",
}


class LoginEnvTransport:
    """Runs the tier's argv as a login node's shell would, in ``env`` (no SSH)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def run(self, argv: Sequence[str], *, stdin: bytes | None = None, timeout: float | None = 60.0,
            check: bool = True) -> CommandResult:
        p = subprocess.run(list(argv), input=stdin or b"", capture_output=True, env=self.env,
                           timeout=timeout or 120, check=False)
        return CommandResult(tuple(argv), p.returncode, p.stdout, p.stderr)

    def close(self) -> None:
        pass


def _login_env(cluster_env: dict[str, str]) -> LoginEnvTransport:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "SBATCH", "SQUEUE"))}
    return LoginEnvTransport({**base, "SLURM_CONF": cluster_env["SLURM_CONF"], **HOSTILE})


class SSHLoginEnv:
    """The real SSH transport to the test cluster's sshd, each command started under ``env
    VAR=...`` as a login shell exporting them would start it (per command: no file of the login
    user changes, so other tests running at the same time never see this environment)."""

    def __init__(self, cluster_env: dict[str, str]) -> None:
        profile = Profile(name="box", tier="slurm", settings={
            "host": cluster_env["JT_SSH_HOST"], "port": int(cluster_env["JT_SSH_PORT"]),
            "user": cluster_env["JT_SSH_USER"], "identity_file": cluster_env["JT_SSH_KEY"],
            "known_hosts": cluster_env["JT_KNOWN_HOSTS"], "workdir": "/var/lib/jupyter-tiers-jobs/box"})
        self.inner = transport_for(profile)

    def run(self, argv: Sequence[str], **kw: Any) -> CommandResult:
        return self.inner.run(["env", *(f"{k}={v}" for k, v in HOSTILE.items()), *argv], **kw)

    def close(self) -> None:
        self.inner.close()


TRANSPORTS: dict[str, Callable[[dict[str, str]], Any]] = {"login-env": _login_env, "ssh": SSHLoginEnv}


def _plain(*argv: str, env: dict[str, str]) -> str:
    """A Slurm command in a clean environment: what the cluster really holds."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SBATCH", "SQUEUE", "SACCT",
                                                                       "SCANCEL", "SLURM_TIME"))}
    clean["SLURM_CONF"] = env["SLURM_CONF"]
    return subprocess.run(list(argv), capture_output=True, text=True, env=clean, timeout=60,
                          check=False).stdout


@pytest.mark.parametrize("make", list(TRANSPORTS.values()), ids=list(TRANSPORTS))
def test_a_hostile_login_environment_changes_nothing(make: Callable[[dict[str, str]], Any],
                                                     cluster_env: dict[str, str], tmp_path: Path) -> None:
    profile = Profile(name="box", tier="slurm", settings={
        "host": "login", "workdir": "/var/lib/jupyter-tiers-jobs/box"})
    tier = SlurmTier(profile, Registry(tmp_path / "registry.sqlite"), transport=make(cluster_env))  # type: ignore[arg-type]  # run() is what the tier uses
    # what the magic line sets: --name envproof --partition debug --time 00:10:00 --sbatch --hold
    job = tier.submit(tier.make_spec("sleep 300", name="envproof", shell=True, partition="debug",
                                     time="00:10:00", sbatch_options=["--hold"]))
    try:
        shown = _plain("scontrol", "-o", "show", "job", job.id, env=cluster_env)
        fields = dict(w.split("=", 1) for w in shown.split() if "=" in w)
        # what the line and profile set wins over SBATCH_*; what they do not set stays the site's
        assert (fields["JobName"], fields["Partition"], fields["TimeLimit"]) == (
            "envproof", "debug", "00:10:00")
        assert fields.get("DelayBoot") == "00:07:00"
        # squeue under SQUEUE_USERS/SQUEUE_PARTITION/SLURM_TIME_FORMAT still finds it, and says why
        record = tier.registry.list(limit=5)[0]
        info = tier.poll_scheduler([record])[job.id]
        assert (info.state, info.reason) == (JobState.PENDING, "JobHeldUser")
        # SCANCEL_STATE=RUNNING must not turn the cancel of a pending job into a no-op
        tier.cancel(record)
        deadline = time.monotonic() + 120
        state = ""
        while time.monotonic() < deadline:
            state = _plain("squeue", "-h", "-t", "all", "-j", job.id, "-o", "%T", env=cluster_env).strip()
            if state in ("CANCELLED", ""):
                break
            time.sleep(0.5)
        assert state in ("CANCELLED", ""), state
        ended = tier.poll_scheduler([record])[job.id]
        assert ended.state is JobState.CANCELLED
        # a time stamp as our parsers read it, not SLURM_TIME_FORMAT=relative's "Today 20:06"
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", ended.start_time or ""), ended.start_time
    finally:
        _plain("scancel", job.id, env=cluster_env)
        tier.close()
