"""Pure: rolling a Deployment back to a revision of its ReplicaSet history, as
``kubectl rollout undo [--to-revision=N]`` does: the ReplicaSet of that revision gives the pod
template (less its ``pod-template-hash`` label), which replaces the Deployment's; the Deployment
controller then scales that ReplicaSet up again and gives it the next revision number.

One thing kubectl does not know about: a jupyter-tiers pod runs the cell body from the
``NAME-code`` ConfigMap (and ``--sync``'s files from ``NAME-sync``), which holds the *newest*
cell, and its env values from the ``NAME-env`` Secret. The template only carries their hashes
(render.py), so :func:`plan_rollback` says which code the target needs (:func:`code_key`; the
tier keeps each applied revision's ConfigMaps) and refuses a revision whose env values differ
from the current ones (their values are kept nowhere but in the Secret).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.errors import TiersError
from .render import BODY_HASH_ANNOTATION, ENV_HASH_ANNOTATION
from .sync_render import SYNC_HASH_ANNOTATION

REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
HASH_LABEL = "pod-template-hash"


@dataclass(frozen=True)
class RollbackPlan:
    """What rolling back does: the Deployment's template becomes ``template`` (that of
    ``revision``), and the code ConfigMaps stored under ``code_key`` are applied first unless
    ``code_changes`` is False (the target runs the same code as now)."""

    revision: int
    current: int
    template: dict[str, Any]
    code_key: str
    code_changes: bool


def _revision(obj: Mapping[str, Any]) -> int | None:
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(REVISION_ANNOTATION)
    try:
        return int(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _annotations(template: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = template.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    return annotations if isinstance(annotations, Mapping) else {}


def code_key(template: Mapping[str, Any]) -> str:
    """Which code a pod template runs: its body hash and --sync hash (``-`` when none)."""
    annotations = _annotations(template)
    body = str(annotations.get(BODY_HASH_ANNOTATION) or "-")
    sync = str(annotations.get(SYNC_HASH_ANNOTATION) or "-")
    return f"{body}.{sync}"


def revisions(deployment: Mapping[str, Any], replicasets: Sequence[Mapping[str, Any]]
              ) -> dict[int, Mapping[str, Any]]:
    """The ReplicaSets the Deployment owns, by revision."""
    uid = (deployment.get("metadata") or {}).get("uid")
    out: dict[int, Mapping[str, Any]] = {}
    for rs in replicasets:
        owners = (rs.get("metadata") or {}).get("ownerReferences") or []
        if not any(isinstance(o, Mapping) and o.get("uid") == uid for o in owners):
            continue
        number = _revision(rs)
        if number is not None:
            out[number] = rs
    return out


def plan_rollback(name: str, deployment: Mapping[str, Any], replicasets: Sequence[Mapping[str, Any]],
                  revision: int | None = None) -> RollbackPlan:
    """The plan for rolling service ``name`` back to ``revision`` (default: the one before the
    current). Raises TiersError naming the revisions there are, or why this one cannot be
    rolled back to."""
    current = _revision(deployment)
    history = revisions(deployment, replicasets)
    if current is None:
        raise TiersError(f"service {name}: the Deployment has no revision yet (its rollout has not started)")
    known = ", ".join(str(n) for n in sorted(history)) or "none"
    if revision is None:
        earlier = [n for n in history if n < current]
        if not earlier:
            raise TiersError(f"service {name}: there is no revision before {current} to roll back to "
                             f"(revisions kept: {known})")
        revision = max(earlier)
    elif isinstance(revision, bool) or not isinstance(revision, int) or revision < 1:
        raise TiersError(f"service {name}: a revision is a whole number from 1, got {revision!r}")
    if revision not in history:
        raise TiersError(f"service {name}: no revision {revision} (revisions kept: {known}; the "
                         "Deployment keeps the last 10)")
    spec = history[revision].get("spec") or {}
    template = copy.deepcopy(spec.get("template") if isinstance(spec, Mapping) else None)
    if not isinstance(template, dict):
        raise TiersError(f"service {name}: revision {revision}'s ReplicaSet has no pod template")
    labels = (template.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(HASH_LABEL, None)
    dep_spec = deployment.get("spec") or {}
    now = dep_spec.get("template") if isinstance(dep_spec, Mapping) else None
    now = now if isinstance(now, Mapping) else {}
    if _annotations(template).get(ENV_HASH_ANNOTATION) != _annotations(now).get(ENV_HASH_ANNOTATION):
        raise TiersError(f"service {name}: revision {revision} ran with other --env values than now, and "
                         "those are kept only in the Secret; run the cell that made it again instead")
    key = code_key(template)
    return RollbackPlan(revision=revision, current=current, template=template, code_key=key,
                        code_changes=key != code_key(now))
