"""Pure rendering of a canary revision (``%%k8s_serve --canary PERCENT``) beside a stable one.

A canary is the rendered service (render.py) turned into a second Deployment ``NAME-canary``
with its own ConfigMap(s) and Secret (``NAME-canary-code``, ``-env``, ``-sync``), whose pods
carry the ``jupyter-tiers/track: canary`` label. The Service is left alone: its selector is the
service name only, so it sends traffic to both Deployments in proportion to their ready pods.
The stable Deployment's selector (the name only) also matches the canary's pods; Kubernetes
keeps them apart by ownerReferences, and our status reads tell them apart by the track label.

Promotion copies the canary's pod template (names turned back) into the stable Deployment;
nothing here needs the cell body again, so Promote works from the sidebar or a new kernel.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.record import LIVE_CANARY

__all__ = ["LIVE_CANARY", "TRACK_LABEL", "canary_name", "canary_objects", "is_canary_pod", "promoted_object",
           "promoted_template", "split_pods"]

TRACK_LABEL = "jupyter-tiers/track"
CANARY = "canary"
# The objects a service names after its Deployment (render.py, sync_render.py).
_OWN_SUFFIXES = ("-code", "-env", "-sync")


def canary_name(service: str) -> str:
    """The canary Deployment's name."""
    return f"{service}-{CANARY}"


def _renamed(value: Any, mapping: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return mapping.get(value, value)
    if isinstance(value, list):
        return [_renamed(v, mapping) for v in value]
    if isinstance(value, dict):
        return {k: _renamed(v, mapping) for k, v in value.items()}
    return value


def _to_canary(service: str) -> dict[str, str]:
    return {f"{service}{s}": f"{canary_name(service)}{s}" for s in _OWN_SUFFIXES}


def canary_objects(objects: Sequence[Mapping[str, Any]], service: str, replicas: int) -> list[dict[str, Any]]:
    """The canary's objects from a rolling service's rendered ones (ConfigMaps, Secret,
    Deployment; never the Service or an autoscaler): renamed ``NAME-canary…``, pods labelled
    ``track: canary``, ``replicas`` of them."""
    mapping = _to_canary(service)
    out: list[dict[str, Any]] = []
    for obj in objects:
        kind = obj.get("kind")
        if kind in ("Service", "HorizontalPodAutoscaler"):
            continue
        new = _renamed(copy.deepcopy(dict(obj)), mapping)
        if kind == "Deployment":
            new["metadata"]["name"] = canary_name(service)
            spec = new["spec"]
            spec["replicas"] = replicas
            spec["selector"]["matchLabels"][TRACK_LABEL] = CANARY
            spec["template"]["metadata"]["labels"][TRACK_LABEL] = CANARY
        out.append(new)
    return out


def promoted_template(canary_template: Mapping[str, Any], service: str) -> dict[str, Any]:
    """The canary Deployment's pod template as the stable Deployment runs it: the canary's
    object names turned back into the stable ones and the track label dropped."""
    mapping = {v: k for k, v in _to_canary(service).items()}
    template = _renamed(copy.deepcopy(dict(canary_template)), mapping)
    labels = template.setdefault("metadata", {}).setdefault("labels", {})
    labels.pop(TRACK_LABEL, None)
    labels.pop("pod-template-hash", None)
    return dict(template)


def promoted_object(canary_obj: Mapping[str, Any], service: str) -> dict[str, Any]:
    """A canary ConfigMap or Secret as the stable revision's (name turned back; server-set
    metadata dropped so that it can be applied)."""
    mapping = {v: k for k, v in _to_canary(service).items()}
    meta = canary_obj.get("metadata") or {}
    out: dict[str, Any] = {
        "apiVersion": canary_obj.get("apiVersion", "v1"),
        "kind": canary_obj.get("kind"),
        "metadata": {k: copy.deepcopy(meta[k]) for k in ("namespace", "labels", "annotations") if k in meta},
    }
    out["metadata"]["name"] = mapping.get(str(meta.get("name")), str(meta.get("name")))
    for key in ("data", "binaryData", "type"):
        if key in canary_obj:
            out[key] = copy.deepcopy(canary_obj[key])
    return out


def is_canary_pod(pod: Mapping[str, Any]) -> bool:
    """Whether a pod belongs to the canary revision."""
    return ((pod.get("metadata") or {}).get("labels") or {}).get(TRACK_LABEL) == CANARY


def split_pods(pods: Sequence[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """A service's pods as (stable, canary)."""
    stable: list[Mapping[str, Any]] = []
    canary: list[Mapping[str, Any]] = []
    for pod in pods:
        (canary if is_canary_pod(pod) else stable).append(pod)
    return stable, canary

