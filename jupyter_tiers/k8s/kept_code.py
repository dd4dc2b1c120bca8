"""What this machine keeps of a Kubernetes service beyond the cluster: each applied revision's code
objects (so a rollback can restore a cell body the cluster no longer holds) and this user's key
for the env hash. Files are 0600 in Jupyter's data directory; env values are never kept."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CODE_KEY = re.compile(r"[0-9a-f-]{1,64}\.[0-9a-f-]{1,64}")
MAX_KEPT_CODE = 12  # the Deployment keeps 10 old ReplicaSets (revisionHistoryLimit), plus the current


def code_dir(profile: str, namespace: str, name: str) -> Path:
    """Where one service's kept revisions live (a digest of profile, namespace and name)."""
    from jupyter_core.paths import jupyter_data_dir  # lazy: jupyter_core only where files are kept

    digest = hashlib.sha256(f"{profile}/{namespace}/{name}".encode()).hexdigest()[:24]
    return Path(jupyter_data_dir()) / "tiers" / "k8s-code" / digest


def is_code(obj: Mapping[str, Any]) -> bool:
    """A revision's code: its ``-code`` ConfigMap, its ``-sync`` Secret (a ConfigMap before
    issue 26); never the ``-env`` Secret (env values are kept nowhere but in the cluster)."""
    name = str((obj.get("metadata") or {}).get("name") or "")
    return obj.get("kind") == "ConfigMap" or (obj.get("kind") == "Secret" and name.endswith("-sync"))


def save_code(profile: str, namespace: str, name: str, key: str, objects: list[dict[str, Any]]) -> None:
    """Keep the code objects of one applied revision (0600, the newest MAX_KEPT_CODE)."""
    if not CODE_KEY.fullmatch(key):
        return
    folder = code_dir(profile, namespace, name)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / f"{key}.json"
    tmp = folder / f".{key}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(objects, f)
    os.replace(tmp, path)
    kept = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in kept[MAX_KEPT_CODE:]:
        with contextlib.suppress(OSError):
            old.unlink()


def load_code(profile: str, namespace: str, name: str, key: str) -> list[dict[str, Any]] | None:
    """The code ConfigMaps kept for ``key`` (a revision's code_key), or None."""
    if not CODE_KEY.fullmatch(key):
        return None
    try:
        data = json.loads((code_dir(profile, namespace, name) / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, list) or not all(isinstance(o, dict) and is_code(o) for o in data):
        return None
    return data


def env_key() -> bytes:
    """This user's key for the env hash (see render.env_hash), kept 0600 in the data dir."""
    from jupyter_core.paths import jupyter_data_dir  # lazy: jupyter_core only where files are kept

    path = Path(jupyter_data_dir()) / "tiers" / "env-hash.key"
    try:
        return path.read_bytes()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        key = secrets.token_bytes(32)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            return path.read_bytes()
        with os.fdopen(fd, "wb") as f:
            f.write(key)
        return key
