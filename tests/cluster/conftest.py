"""Fixtures for tests against the real Slurm cluster over the real sshd on loopback."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_tiers.config.profiles import load_config
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.slurm.tier import SlurmTier

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent

# Python lines to begin a job body with, for a test where one rank fails and fail-stop must stop
# every other one: each rank leaves a file in $JT_JOB_DIR/up, and ``all_up()`` waits (at most
# ``timeout`` s) until every rank of the job has. A rank that fails only after all_up() cannot have
# fail-stop kill another before its rank shim recorded its start (on a busy machine a node's ranks
# may start seconds after another's): such a rank would end "waiting", not "stopped".
RANKS_UP = textwrap.dedent(
    """\
    import os as _os, time as _time
    _up = _os.path.join(_os.environ["JT_JOB_DIR"], "up")
    _os.makedirs(_up, exist_ok=True)
    open(_os.path.join(_up, _os.environ["RANK"]), "w").close()


    def all_up(timeout=120):
        deadline = _time.time() + timeout
        while len(_os.listdir(_up)) < int(_os.environ["WORLD_SIZE"]) and _time.time() < deadline:
            _time.sleep(0.1)


    """
)


def profile_yaml(env: dict[str, str], name: str = "box", **overrides: str) -> str:
    known_hosts = overrides.get("known_hosts", env["JT_KNOWN_HOSTS"])
    return textwrap.dedent(
        f"""\
        profiles:
          {name}:
            tier: slurm
            host: {env["JT_SSH_HOST"]}
            port: {env["JT_SSH_PORT"]}
            user: {env["JT_SSH_USER"]}
            identity_file: {env["JT_SSH_KEY"]}
            known_hosts: {known_hosts}
            workdir: /var/lib/jupyter-tiers-jobs/box
            setup: ["source {VENV_BIN}/activate"]
            status_interval: 3
            defaults: {{partition: debug, time: "00:10:00", python: {VENV_BIN}/python}}
        """
    )


@pytest.fixture
def tiers_yaml(cluster_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "tiers.yaml"
    path.write_text(profile_yaml(cluster_env))
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))
    return path


@pytest.fixture
def box(tiers_yaml: Path, tmp_path: Path) -> Iterator[SlurmTier]:
    tier = SlurmTier(load_config().profile("box"), Registry(tmp_path / "registry.sqlite"))
    yield tier
    # Leave no job of this test behind.
    for rec in tier.registry.list(limit=1000):
        tier.cancel(rec)
    tier.close()


def cluster(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run the cluster script (stop-ctld, start-ctld, up --nodes N...)."""
    script = ROOT / "jupyter_tiers" / "tools" / "sandbox" / "cluster.sh"
    return subprocess.run(
        ["bash", str(script), *args], check=check, capture_output=True, text=True, timeout=900
    )

