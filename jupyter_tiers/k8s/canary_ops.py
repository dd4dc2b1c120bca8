"""Canary revisions on the cluster: start one beside a live service, promote it, roll it back.

The objects come from canary.py (pure); this module applies, copies and deletes them through the
tier's client. The registry record of the service keeps ``spec["live_canary"]`` while one runs:
its share, its replica count, the total, and what the service becomes once it is promoted.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

from ..errors import ApiError, SpecError, TiersError
from ..handles import Service
from ..model import ServeSpec, ServiceState
from ..registry import JobRecord
from ..servespec import canary_replicas
from .canary import (
    CANARY,
    LIVE_CANARY,
    canary_name,
    canary_objects,
    promoted_object,
    promoted_template,
)
from .render import MODEL_FROM_ANNOTATION, render_yaml

if TYPE_CHECKING:
    from .tier import K8sTier

# The canary's own objects besides its Deployment: (kind, suffix of the name).
_OWN = (("ConfigMap", "-code"), ("Secret", "-env"), ("Secret", "-sync"))


def read_object(tier: K8sTier, kind: str, name: str, ns: str) -> dict[str, Any] | None:
    """One object of the service's namespace as JSON, or None when it does not exist (404)."""
    readers = {
        "Deployment": (tier.client.apps().read_namespaced_deployment, "deployments"),
        "ConfigMap": (tier.client.core().read_namespaced_config_map, "configmaps"),
        "Secret": (tier.client.core().read_namespaced_secret, "secrets"),
    }
    fn, resource = readers[kind]
    try:
        resp = tier.client.call(fn, name, ns, _preload_content=False, verb="get", resource=resource,
                                namespace=ns)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise
    data: dict[str, Any] = json.loads(resp.data)
    return data


def _current(tier: K8sTier, record: JobRecord) -> JobRecord:
    return tier.registry.find_by_name(tier.name, record.name) or record


def apply_canary(tier: K8sTier, spec: ServeSpec, stored: dict[str, Any]) -> Service:
    """Start (or update) ``spec`` as the canary of the live service of the same name: its own
    Deployment with ``canary`` percent of ``spec.replicas``, the stable one scaled to the rest."""
    assert spec.canary is not None
    ns = tier.namespace
    existing = tier.registry.find_by_name(tier.name, spec.name)
    stable = read_object(tier, "Deployment", spec.name, ns)
    if existing is not None and existing.spec.get("color"):
        raise SpecError("canary", f"service {spec.name} runs blue-green; a canary runs beside a "
                        "rolling service")
    if existing is None or existing.state == ServiceState.DELETED.value or stable is None:
        raise SpecError("canary", f"service {spec.name} is not running in namespace {ns}: deploy it "
                        "without --canary first, then run the new revision with --canary")
    count = canary_replicas(spec.replicas, spec.canary)
    objects = canary_objects(tier._manifests(spec), spec.name, count)
    for obj in objects:
        tier._apply_object(obj)
    tier._scale_deployment(spec.name, ns, spec.replicas - count)
    whole = dataclasses.replace(spec, canary=None)
    canary = {
        "percent": spec.canary, "replicas": count, "total": spec.replicas,
        "deployment": canary_name(spec.name), "applied_spec": stored,
        "script": render_yaml(tier._manifests(whole)),  # the service once promoted
    }
    record = dataclasses.replace(existing, spec={**existing.spec, LIVE_CANARY: canary},
                                 state=ServiceState.DEPLOYING.value)
    tier.registry.add(record)
    return Service(tier, record)


def remove_canary(tier: K8sTier, name: str, ns: str) -> None:
    """Delete the canary's Deployment, ConfigMaps and Secret (those that exist)."""
    tier._delete_quietly("Deployment", canary_name(name), ns)
    for kind, suffix in _OWN:
        tier._delete_quietly(kind, f"{canary_name(name)}{suffix}", ns)


def _without_canary(tier: K8sTier, record: JobRecord, **spec_updates: Any) -> None:
    spec = {k: v for k, v in record.spec.items() if k != LIVE_CANARY}
    spec.update(spec_updates)
    tier.registry.add(dataclasses.replace(record, spec=spec, state=ServiceState.DEPLOYING.value))


def promote(tier: K8sTier, record: JobRecord) -> str:
    """Make the canary the service: its code, env and pod template go to the stable Deployment
    (a rolling update to the full replica count), then the canary's objects are removed.
    Needs nothing from the kernel that started the canary. Returns one line saying what happened."""
    current = _current(tier, record)
    canary = current.spec.get(LIVE_CANARY)
    if not canary:
        raise TiersError(f"service {record.name} has no canary to promote")
    ns = current.spec.get("namespace") or tier.namespace
    name = record.name
    canary_dep = read_object(tier, "Deployment", canary_name(name), ns)
    stable = read_object(tier, "Deployment", name, ns)
    if canary_dep is None or stable is None:
        raise TiersError(f"service {name}: the {'canary' if canary_dep is None else 'stable'} "
                         "Deployment is gone; nothing was promoted")
    stale = []
    for kind, suffix in _OWN:  # the canary's code, env and synced files become the service's
        obj = read_object(tier, kind, f"{canary_name(name)}{suffix}", ns)
        if obj is not None:
            tier._apply_object(promoted_object(obj, name))
        elif suffix != "-code":  # the new revision has none: removed once the old pods are told
            stale.append((kind, f"{name}{suffix}"))
    meta = stable["metadata"]
    annotations = {k: v for k, v in (canary_dep["metadata"].get("annotations") or {}).items()
                   if k == MODEL_FROM_ANNOTATION}
    spec = stable["spec"]
    dep_spec: dict[str, Any] = {
        "replicas": int(canary["total"]),
        "selector": spec["selector"],
        "strategy": spec.get("strategy") or {},
        "template": promoted_template(canary_dep["spec"]["template"], name),
    }
    if spec.get("progressDeadlineSeconds") is not None:
        dep_spec["progressDeadlineSeconds"] = spec["progressDeadlineSeconds"]
    metadata: dict[str, Any] = {"name": name, "namespace": ns, "labels": meta.get("labels") or {}}
    if annotations:
        metadata["annotations"] = annotations
    applied = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata, "spec": dep_spec}
    tier._apply_object(applied)
    for kind, stale_name in stale:
        tier._delete_quietly(kind, stale_name, ns)
    remove_canary(tier, name, ns)
    _without_canary(tier, dataclasses.replace(current, script=str(canary.get("script") or current.script)),
                    **_spec_fields(canary["applied_spec"]),
                    applied_spec=_spec_fields(canary["applied_spec"]))
    return (f"service {name}: canary promoted; the {CANARY} revision rolls out to all "
            f"{canary['total']} replicas")


def _spec_fields(applied: dict[str, Any]) -> dict[str, Any]:
    """The stored spec fields of the promoted revision (what the record shows as its spec)."""
    return {**applied, "canary": None}


def rollback_canary(tier: K8sTier, record: JobRecord) -> str:
    """Remove the canary and give the stable revision its full replica count back."""
    current = _current(tier, record)
    canary = current.spec.get(LIVE_CANARY)
    if not canary:
        raise TiersError(f"service {record.name} has no canary to roll back")
    ns = current.spec.get("namespace") or tier.namespace
    if read_object(tier, "Deployment", record.name, ns) is not None:
        tier._scale_deployment(record.name, ns, int(canary["total"]))
    remove_canary(tier, record.name, ns)
    _without_canary(tier, current)
    return f"service {record.name}: canary removed; the stable revision is back to {canary['total']} replicas"
