"""The sandbox's files: where the test cluster keeps its settings (``cluster.env``) and how a
profile is written into a tiers.yaml. Imported by the command (``__init__``) and lab.py alike."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def files_kept(path: Path) -> Iterator[None]:
    """Put ``path`` and its ``.bak`` (what :func:`write_profile` leaves) back as they were on exit:
    their bytes, or absent; a parent directory made meanwhile and left empty is removed. For a
    test or bench that runs the admin's commands against a machine-wide /etc/jupyter/tiers.yaml."""
    paths = (path, path.with_name(path.name + ".bak"))
    had_dir = path.parent.is_dir()
    saved = {p: p.read_bytes() for p in paths if p.is_file()}
    try:
        yield
    finally:
        for each in paths:
            if each in saved:
                each.write_bytes(saved[each])
            else:
                each.unlink(missing_ok=True)
        if not had_dir and path.parent.is_dir() and not any(path.parent.iterdir()):
            path.parent.rmdir()
