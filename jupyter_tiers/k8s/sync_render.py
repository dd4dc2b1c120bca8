"""--sync on Kubernetes, pure: the synced files in a Secret ``D-sync`` beside ``D-code``.

A Secret, not a ConfigMap: the notebook's directory may hold more than code (a config with a
token), and Kubernetes' built-in ``view`` role, which teammates often have in a shared
namespace, reads every ConfigMap but no Secret. Each file is one ``data`` key (``f0``, ``f1``,
...), mapped back to its relative path (and mode) by the volume's ``items``, mounted read-only at
``/jt/sync``: the container's working directory, first on ``PYTHONPATH``. No extraction step, so
any image works. The manifest's digest sits in the pod template's annotations, so a changed
module rolls the pods and an unchanged one changes nothing. A Secret holds at most 1 MiB: over
that, one line says to bake the files into the image or fetch them from the object store, and
:func:`size_refusal` says so from the files' sizes alone, before anything is read or encoded.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Sequence
from typing import Any

from ..data.sync import SyncError

SYNC_DIR = "/jt/sync"
SYNC_HASH_ANNOTATION = "jupyter-tiers/sync-hash"
MAX_OBJECT_BYTES = 1_000_000  # what the API server stores of one object, with some headroom
MAX_CONFIGMAP_BYTES = MAX_OBJECT_BYTES  # the old name


def _encoded(path: str, size: int) -> int:
    """Bytes one file costs in the object: its base64 text, its item's path and some framing."""
    return 4 * ((size + 2) // 3) + len(path) + 40


def _too_big(count: int, raw: int, size: int) -> str:
    return (f"--sync: {count} files, {raw / 1e6:.2f} MB ({size / 1e6:.2f} MB in base64) do not fit "
            "a Kubernetes Secret (about 1 MiB); bake them into the image (--image) or fetch them "
            "from the object store, and sync less (.tiersignore)")


def size_refusal(files: Sequence[tuple[str, int]]) -> str | None:
    """One line when files of these ``(path, size)`` would not fit the ``D-sync`` Secret, from
    the sizes alone (nothing read, nothing encoded); else None."""
    size = sum(_encoded(path, n) for path, n in files)
    if size <= MAX_OBJECT_BYTES:
        return None
    return _too_big(len(files), sum(n for _, n in files), size)


def _check_k8s_path(path: str) -> None:
    # The kubelet refuses an item path with an element starting with ".." (its ..data links).
    if any(part.startswith("..") for part in path.split("/")):
        raise SyncError(f"--sync: {path!r}: Kubernetes refuses path parts starting with '..'; "
                        "rename it or ignore it in .tiersignore")


def with_synced_files(objects: Sequence[dict[str, Any]], files: Sequence[tuple[str, bytes, int]],
                      digest: str) -> list[dict[str, Any]]:
    """``objects`` (render_manifests' output) plus the ``D-sync`` Secret holding ``files``
    (relative path, content, mode) and the Deployment changes that mount it."""
    out = copy.deepcopy(list(objects))
    code = next(o for o in out if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-code"))
    deployment = next(o for o in out if o["kind"] == "Deployment")
    name = code["metadata"]["name"][: -len("-code")] + "-sync"
    for path, _, _ in files:
        _check_k8s_path(path)
    refusal = size_refusal([(path, len(content)) for path, content, _ in files])
    if refusal:
        raise SyncError(refusal)
    data: dict[str, str] = {}
    items: list[dict[str, Any]] = []
    for i, (path, content, mode) in enumerate(files):
        key = f"f{i}"
        data[key] = base64.b64encode(content).decode("ascii")
        items.append({"key": key, "path": path, "mode": mode})
    meta = copy.deepcopy(code["metadata"])
    meta["name"] = name
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque", "data": data}
    out.insert(out.index(code) + 1, secret)

    template = deployment["spec"]["template"]
    template["metadata"].setdefault("annotations", {})[SYNC_HASH_ANNOTATION] = digest
    pod = template["spec"]
    pod.setdefault("volumes", []).append(
        {"name": "sync", "secret": {"secretName": name, "items": items, "defaultMode": 0o644}})
    container = pod["containers"][0]
    container.setdefault("volumeMounts", []).append(
        {"name": "sync", "mountPath": SYNC_DIR, "readOnly": True})
    container["workingDir"] = SYNC_DIR
    env = container.setdefault("env", [])
    if not any(e.get("name") == "PYTHONPATH" for e in env):
        env.append({"name": "PYTHONPATH", "value": SYNC_DIR})
    return out
