"""The sandbox's files: where the test cluster keeps its settings (``cluster.env``) and how a
profile is written into a tiers.yaml. Imported by the command (``__init__``) and lab.py alike."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

PROFILE_NAME = "sandbox"


def cluster_dir() -> Path:
    """Where cluster.sh keeps the test cluster (JT_CLUSTER_DIR, by default /var/lib/...)."""
    return Path(os.environ.get("JT_CLUSTER_DIR", "/var/lib/jupyter-tiers-cluster"))


def read_cluster_env(path: Path | None = None) -> dict[str, str]:
    """The cluster's settings (JT_SSH_HOST, SLURM_CONF, ...) from its cluster.env."""
    path = path or cluster_dir() / "cluster.env"
    out = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def write_profile(path: Path, profile: dict[str, Any], name: str = PROFILE_NAME) -> bool:
    """Add or replace one profile in a tiers.yaml, keeping the others; returns True if changed.

    The previous file is kept as ``tiers.yaml.bak`` (YAML comments are not preserved).
    """
    import yaml

    data: dict[str, Any] = {}
    if path.exists():
        data = yaml.safe_load(path.read_text()) or {}
    profiles = data.setdefault("profiles", {})
    if profiles.get(name) == profile:
        return False
    if path.exists():
        path.with_name(path.name + ".bak").write_text(path.read_text())
    profiles[name] = profile
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return True
