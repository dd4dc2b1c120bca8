"""Shared fixtures. Cluster tests need the Slurm-in-a-box cluster that tests/run.sh starts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jupyter_tiers import sandbox
from tests.helpers import loud_skip

ROOT = Path(__file__).resolve().parent.parent
CLUSTER_DIR = Path(os.environ.get("JT_CLUSTER_DIR", "/var/lib/jupyter-tiers-cluster"))
CLUSTER_SCRIPT = ROOT / "jupyter_tiers" / "sandbox" / "cluster.sh"


def read_cluster_env() -> dict[str, str] | None:
    path = CLUSTER_DIR / "cluster.env"
    return sandbox.read_cluster_env(path) if path.exists() else None


@pytest.fixture(autouse=True)
def _isolated_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own registry and no stray tiers.yaml."""
    monkeypatch.setenv("JUPYTER_TIERS_REGISTRY", str(tmp_path / "registry.sqlite"))


@pytest.fixture(scope="session")
def cluster_env() -> dict[str, str]:
    env = read_cluster_env()
    if env is None:
        reason = (
            f"Slurm test cluster not running ({CLUSTER_DIR}/cluster.env missing): "
            "start it with `bash tests/run.sh` (needs root and apt)"
        )
        loud_skip("cluster tests", reason)
    return env
