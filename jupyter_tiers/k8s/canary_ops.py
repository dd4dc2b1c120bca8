"""Canary revisions on the cluster: start one beside a live service, promote it, roll it back.

The objects come from canary.py (pure); this module applies, copies and deletes them through the
tier's client. The registry record of the service keeps ``spec["live_canary"]`` while one runs:
its share, its replica count, the total, and what the service becomes once it is promoted.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from typing import TYPE_CHECKING, Any

from ..config.registry import JobRecord
from ..core.errors import ApiError, SpecError, TiersError
from ..core.model import ServeSpec, ServiceState, ServiceStatus
from ..engine.handles import Service
from ..spec.servespec import canary_replicas
from .canary import (
    CANARY,
    LIVE_CANARY,
    canary_name,
    canary_objects,
    promoted_object,
    promoted_template,
    split_pods,
)
from .parse import service_status
from .render import MODEL_FROM_ANNOTATION, render_yaml

if TYPE_CHECKING:
    from .tier import K8sTier
    from .watch import NamespaceWatch

#: Seconds a promote may take to roll the canary's revision onto every replica.
PROMOTE_TIMEOUT = 900.0

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
    objects = canary_objects(tier.manifests(spec), spec.name, count)
    for obj in objects:
        tier.objects.apply(obj)
    tier.objects.scale_deployment(spec.name, ns, spec.replicas - count)
    whole = dataclasses.replace(spec, canary=None)
    canary = {
        "percent": spec.canary, "replicas": count, "total": spec.replicas,
        "deployment": canary_name(spec.name), "applied_spec": stored,
        "script": render_yaml(tier.manifests(whole)),  # the service once promoted
    }
    record = dataclasses.replace(existing, spec={**existing.spec, LIVE_CANARY: canary},
                                 state=ServiceState.DEPLOYING.value)
    tier.registry.add(record)
    return Service(tier, record)


def remove_canary(tier: K8sTier, name: str, ns: str) -> None:
    """Delete the canary's Deployment, ConfigMaps and Secret (those that exist)."""
    tier.objects.delete_quietly("Deployment", canary_name(name), ns)
    for kind, suffix in _OWN:
        tier.objects.delete_quietly(kind, f"{canary_name(name)}{suffix}", ns)


def _without_canary(tier: K8sTier, record: JobRecord, **spec_updates: Any) -> None:
    spec = {k: v for k, v in record.spec.items() if k != LIVE_CANARY}
    spec.update(spec_updates)
    tier.registry.add(dataclasses.replace(record, spec=spec, state=ServiceState.DEPLOYING.value))


def promote(tier: K8sTier, record: JobRecord, timeout: float | None = None) -> str:
    """Make the canary the service without a moment of old code or lost capacity: the canary's
    code, env and pod template go to the stable Deployment at its current replica count (a
    rolling update, surge first, so no pod of the old template starts), which is then scaled to
    the full count; only once all of them are ready is the canary removed. Ready replicas never
    drop below what served before. Blocks until done (at most ``timeout``, default
    PROMOTE_TIMEOUT seconds; a promote cut short is finished by promoting again). Needs nothing
    from the kernel that started the canary. Returns one line saying what happened."""
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
    total = int(canary["total"])
    stale = []
    for kind, suffix in _OWN:  # the canary's code, env and synced files become the service's
        obj = read_object(tier, kind, f"{canary_name(name)}{suffix}", ns)
        if obj is not None:
            tier.objects.apply(promoted_object(obj, name))
        elif suffix != "-code":  # the new revision has none: removed once the old pods are told
            stale.append((kind, f"{name}{suffix}"))
    meta = stable["metadata"]
    annotations = {k: v for k, v in (canary_dep["metadata"].get("annotations") or {}).items()
                   if k == MODEL_FROM_ANNOTATION}
    spec = stable["spec"]
    # The stable count as it is: a change of replicas in the same write is a scaling event,
    # which the Deployment controller serves first by scaling the OLD ReplicaSet up.
    now_replicas = int(spec.get("replicas") or 0)
    dep_spec: dict[str, Any] = {
        "replicas": now_replicas,
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
    resp = tier.objects.apply(applied)
    generation = int(((json.loads(resp.data) or {}).get("metadata") or {}).get("generation") or 0)
    limit = PROMOTE_TIMEOUT if timeout is None else timeout
    deadline = time.monotonic() + limit
    if now_replicas > 0:  # the stable pods roll to the new revision, one surge pod at a time
        _wait_rolled(tier, current, name, generation, now_replicas, deadline, limit)
    if now_replicas != total:  # then the rest, all of the new revision (one ReplicaSet is active)
        tier.objects.scale_deployment(name, ns, total)
        _wait_rolled(tier, current, name, generation + 1, total, deadline, limit)
    for kind, stale_name in stale:
        tier.objects.delete_quietly(kind, stale_name, ns)
    remove_canary(tier, name, ns)
    _without_canary(tier, dataclasses.replace(current, script=str(canary.get("script") or current.script)),
                    **_spec_fields(canary["applied_spec"]),
                    applied_spec=_spec_fields(canary["applied_spec"]))
    return (f"service {name}: canary promoted; all {total} replicas run the {CANARY} revision "
            "and the canary is removed")


def _wait_rolled(tier: K8sTier, record: JobRecord, name: str, generation: int, replicas: int,
                 deadline: float, limit: float) -> None:
    """Block until the stable Deployment ``name`` has observed ``generation`` and runs
    ``replicas`` ready pods, all of its current template (kubectl's rollout rule), through the
    namespace's shared watch. TiersError when it fails or ``deadline`` passes: the canary is
    left serving beside it."""
    done = threading.Event()
    last: list[ServiceStatus] = []

    def compute(nsw: NamespaceWatch) -> ServiceStatus:
        deps = [d for d in nsw.deployments(name) if d["metadata"]["name"] == name]
        stable_pods, _ = split_pods(nsw.pods(name))
        status = service_status(name, deps[0] if deps else None, stable_pods, nsw.events(), now=time.time())
        meta = deps[0]["metadata"] if deps else {}
        if deps and int(meta.get("generation") or 0) < generation:  # the watch has not seen the write
            status = dataclasses.replace(status, state=ServiceState.DEPLOYING,
                                         reason="waiting for the new spec to be observed")
        return status

    def settle(status: ServiceStatus) -> None:
        last[:] = [status]
        ready = status.state is ServiceState.READY and status.desired == replicas
        if ready or status.state in (ServiceState.FAILED, ServiceState.DELETED):
            done.set()

    nsw = tier._watch_of_namespace()
    token = nsw.subscribe(name, compute, settle)
    try:
        done.wait(max(0.0, deadline - time.monotonic()))
    finally:
        nsw.unsubscribe(token)
    status = last[0] if last else None
    if status is not None and status.state is ServiceState.READY and status.desired == replicas:
        return
    why = (status.reason or status.state.value) if status is not None else "no status seen"
    if status is None or status.state not in (ServiceState.FAILED, ServiceState.DELETED):
        why = f"not rolled out after {limit:g} s ({why})"
    raise TiersError(f"service {record.name}: promote stopped, the canary's revision on the stable "
                     f"Deployment: {why}; the canary still serves. Promote again to finish, or "
                     "roll back the Deployment (svc.rollback() once the canary is removed)")


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
        tier.objects.scale_deployment(record.name, ns, int(canary["total"]))
    remove_canary(tier, record.name, ns)
    _without_canary(tier, current)
    return f"service {record.name}: canary removed; the stable revision is back to {canary['total']} replicas"
