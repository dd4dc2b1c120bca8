"""--sync on Kubernetes, pure: the synced files in a ConfigMap ``D-sync`` beside ``D-code``.

Each file is one ``binaryData`` key (``f0``, ``f1``, ...), mapped back to its relative path (and
mode) by the volume's ``items``, mounted read-only at ``/jt/sync``: the container's working
directory, first on ``PYTHONPATH``. No extraction step, so any image works. The manifest's digest
sits in the pod template's annotations, so a changed module rolls the pods and an unchanged one
changes nothing. A ConfigMap holds at most 1 MiB: over that, one line says to bake the files into
the image or fetch them from the object store.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Sequence
from typing import Any

from ..sync import SyncError

SYNC_DIR = "/jt/sync"
SYNC_HASH_ANNOTATION = "jupyter-tiers/sync-hash"
MAX_CONFIGMAP_BYTES = 1_000_000  # what the API server stores of one object, with some headroom


def _check_k8s_path(path: str) -> None:
    # The kubelet refuses an item path with an element starting with ".." (its ..data links).
    if any(part.startswith("..") for part in path.split("/")):
        raise SyncError(f"--sync: {path!r}: Kubernetes refuses path parts starting with '..'; "
                        "rename it or ignore it in .tiersignore")


def with_synced_files(objects: Sequence[dict[str, Any]], files: Sequence[tuple[str, bytes, int]],
                      digest: str) -> list[dict[str, Any]]:
    """``objects`` (render_manifests' output) plus the ``D-sync`` ConfigMap holding ``files``
    (relative path, content, mode) and the Deployment changes that mount it."""
    out = copy.deepcopy(list(objects))
    code = next(o for o in out if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-code"))
    deployment = next(o for o in out if o["kind"] == "Deployment")
    name = code["metadata"]["name"][: -len("-code")] + "-sync"
    binary: dict[str, str] = {}
    items: list[dict[str, Any]] = []
    size = 0
    for i, (path, content, mode) in enumerate(files):
        _check_k8s_path(path)
        key = f"f{i}"
        binary[key] = base64.b64encode(content).decode("ascii")
        size += len(binary[key]) + len(path) + 40
        items.append({"key": key, "path": path, "mode": mode})
    if size > MAX_CONFIGMAP_BYTES:
        raw = sum(len(c) for _, c, _ in files)
        raise SyncError(f"--sync: {len(files)} files, {raw / 1e6:.2f} MB ({size / 1e6:.2f} MB in "
                        "base64) do not fit a ConfigMap (about 1 MiB); bake them into the image "
                        "(--image) or fetch them from the object store, and sync less (.tiersignore)")
    meta = copy.deepcopy(code["metadata"])
    meta["name"] = name
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "binaryData": binary}
    out.insert(out.index(code) + 1, cm)

    template = deployment["spec"]["template"]
    template["metadata"].setdefault("annotations", {})[SYNC_HASH_ANNOTATION] = digest
    pod = template["spec"]
    pod.setdefault("volumes", []).append(
        {"name": "sync", "configMap": {"name": name, "items": items, "defaultMode": 0o644}})
    container = pod["containers"][0]
    container.setdefault("volumeMounts", []).append(
        {"name": "sync", "mountPath": SYNC_DIR, "readOnly": True})
    container["workingDir"] = SYNC_DIR
    env = container.setdefault("env", [])
    if not any(e.get("name") == "PYTHONPATH" for e in env):
        env.append({"name": "PYTHONPATH", "value": SYNC_DIR})
    return out
