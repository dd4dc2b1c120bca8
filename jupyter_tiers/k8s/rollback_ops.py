"""Rolling a Kubernetes service back to an earlier revision of its Deployment (``kubectl rollout
undo`` with the revision's cell body restored from what this machine kept). The plan is pure
(rollback.py); this module reads the history and writes the plan."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ..config.registry import JobRecord
from ..core.errors import TiersError, Unsupported
from . import canary_ops
from .canary import LIVE_CANARY
from .client import FIELD_MANAGER
from .kept_code import load_code
from .rollback import plan_rollback

if TYPE_CHECKING:
    from .tier import K8sTier


def rollback(tier: K8sTier, record: JobRecord, revision: int | None) -> str:
    """K8sTier.rollback: see its docstring."""
    record = tier.registry.find_by_name(tier.name, record.name) or record  # the newest cell's
    if record.spec.get(LIVE_CANARY):
        if revision is not None:
            raise TiersError(f"service {record.name} runs a canary: roll the canary back first "
                             "(rollback without --to) or promote it, then roll back to a revision")
        return canary_ops.rollback_canary(tier, record)
    ns = record.spec.get("namespace") or tier.namespace
    if record.spec.get("color") or record.spec.get("strategy") == "bluegreen":
        raise Unsupported(f"service {record.name} is blue-green: its previous colour is removed once "
                          "the switch is done, so there is no history to roll back to; run the "
                          "earlier cell again")
    name = tier.deployment_name(record)
    deployment = json.loads(tier.client.call(
        tier.client.apps().read_namespaced_deployment, name, ns, _preload_content=False,
        verb="get", resource="deployments", namespace=ns).data)
    selector = f"app.kubernetes.io/name={record.name},app.kubernetes.io/managed-by=jupyter-tiers"
    replicasets = json.loads(tier.client.call(
        tier.client.apps().list_namespaced_replica_set, ns, label_selector=selector,
        _preload_content=False, verb="list", resource="replicasets", namespace=ns).data)
    replicasets = replicasets.get("items") or []
    plan = plan_rollback(record.name, deployment, replicasets, revision)
    if plan.revision == plan.current:
        return f"service {record.name} is at revision {plan.current} already; nothing changed"
    if plan.code_changes:
        stored = load_code(tier.name, ns, record.name, plan.code_key)
        if stored is None:
            raise TiersError(f"service {record.name}: revision {plan.revision}'s cell body is not kept "
                             "on this machine (it was applied from another one); run that cell again")
        for obj in stored:
            tier.objects.apply(obj)
    tier.client.call(tier.client.apps().patch_namespaced_deployment, name, ns,
                     [{"op": "replace", "path": "/spec/template", "value": plan.template}],
                     field_manager=f"{FIELD_MANAGER}-rollback",
                     _content_type="application/json-patch+json",
                     verb="patch", resource="deployments", namespace=ns)
    return (f"service {record.name} rolling back to revision {plan.revision} (it becomes revision "
            f"{max(plan.current, plan.revision) + 1}); running the cell again rolls forward")
