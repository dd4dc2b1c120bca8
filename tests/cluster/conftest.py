"""Fixtures for tests against the real Slurm cluster over the real sshd on loopback."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_tiers.config import load_config
from jupyter_tiers.registry import Registry
from jupyter_tiers.slurm.tier import SlurmTier

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


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
    script = ROOT / "jupyter_tiers" / "sandbox" / "cluster.sh"
    return subprocess.run(
        ["bash", str(script), *args], check=check, capture_output=True, text=True, timeout=900
    )

