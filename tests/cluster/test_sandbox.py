"""`jupyter tiers sandbox up|down|status`: idempotent, writes a working profile, refuses clearly."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.cluster, pytest.mark.cluster_disruptive]  # `sandbox down` stops the cluster

JUPYTER_TIERS = [sys.executable, "-m", "jupyter_tiers.faces.cli"]


def sandbox(*args: str, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*JUPYTER_TIERS, "sandbox", *args, "--config", str(config)],
                          capture_output=True, text=True, timeout=900)


def test_up_status_down_are_idempotent_and_up_writes_the_profile(
    cluster_env: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "tiers.yaml"
    config.write_text("profiles:\n  mine: {tier: local}\n")
    first = sandbox("up", config=config)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "wrote profile 'sandbox'" in first.stdout
    data = yaml.safe_load(config.read_text())
    assert data["profiles"]["mine"] == {"tier": "local"}  # other profiles kept
    profile = data["profiles"]["sandbox"]
    assert profile["port"] == int(cluster_env["JT_SSH_PORT"])
    assert profile["known_hosts"] == cluster_env["JT_KNOWN_HOSTS"]
    again = sandbox("up", config=config)
    assert again.returncode == 0 and "kept profile 'sandbox'" in again.stdout
    assert sandbox("status", config=config).returncode == 0
    # down twice, then up again: the cluster comes back healthy.
    assert sandbox("down", config=config).returncode == 0
    assert sandbox("down", config=config).returncode == 0
    assert sandbox("status", config=config).returncode != 0
    back = sandbox("up", config=config)
    assert back.returncode == 0, back.stdout + back.stderr
    assert sandbox("status", config=config).returncode == 0


def test_the_written_profile_runs_a_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "tiers.yaml"
    assert sandbox("up", config=config).returncode == 0
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(config))
    from jupyter_tiers.api import make_tier
    from jupyter_tiers.config.profiles import load_config
    from jupyter_tiers.core.model import JobState

    tier = make_tier(load_config().profile("sandbox"))
    try:
        job = tier.submit(tier.make_spec("print('sandbox ok')", name="sandbox-check", nodes=2))
        assert job.wait(timeout=180).state is JobState.COMPLETED
        assert job.logs(rank=1).strip() == "sandbox ok"
    finally:
        tier.close()


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_refuses_clearly_when_not_root(tmp_path: Path) -> None:
    script = Path(__file__).resolve().parents[2] / "jupyter_tiers" / "tools" / "sandbox" / "cluster.sh"
    result = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash", str(script), "up"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 3
    assert "root" in (result.stdout + result.stderr).lower()
