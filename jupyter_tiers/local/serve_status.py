"""Pure translation of a local service's files (what the tier asked for in ``desired.json``, what
the supervisor reports in ``service.json``) into the serving model, with the same states and
reasons a Kubernetes Deployment gets (k8s/parse.py): DEPLOYING, READY, DEGRADED, FAILED,
SCALED_DOWN, DELETED.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core.model import PodInfo, ServiceState, ServiceStatus
from ..serving.status import describe_pod_problem, with_canary

NODE = "localhost"
#: Reasons of a replica that will not get better by waiting.
FAILING = frozenset({"CrashLoopBackOff", "StartError"})


def _num(value: Any, default: float | None = None) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def pod_info(replica: Mapping[str, Any]) -> PodInfo:
    """One replica of ``service.json`` as a PodInfo."""
    return PodInfo(
        name=str(replica.get("name") or "?"),
        phase=str(replica.get("phase") or "Pending"),
        ready=replica.get("ready") is True,
        restarts=_int(replica.get("restarts")),
        node=NODE,
        started_at=_num(replica.get("created_at")),
        reason=_text(replica.get("reason")),
        message=_text(replica.get("message")),
        exit_code=replica.get("exit_code") if isinstance(replica.get("exit_code"), int) else None,
        revision=_text(replica.get("revision")),
    )


def progress_text(desired: int, updated: int, old: int, available: int) -> str | None:
    """kubectl's rollout-status wording, or None when the rollout is done."""
    if updated < desired:
        return f"{updated} out of {desired} new replicas have been updated"
    if old:
        return f"{old} old replicas are pending termination"
    if available < updated:
        return f"{available} of {updated} updated replicas are available"
    return None


def service_status(
    name: str,
    desired: Mapping[str, Any] | None,
    state: Mapping[str, Any] | None,
    *,
    endpoint: str | None = None,
    supervisor_alive: bool = True,
    note: str | None = None,
) -> ServiceStatus:
    """The status of a local service; while a canary runs (``desired["canary"]``), that of the
    live revision's replicas with the canary's beside it (``ServiceStatus.canary``, and its
    replicas among ``pods``, marked by track)."""
    canary = (desired or {}).get("canary")
    if not isinstance(canary, Mapping) or not _text(canary.get("revision")) or (desired or {}).get("deleted"):
        return _status_of(name, desired, state, endpoint=endpoint, supervisor_alive=supervisor_alive,
                          note=note)
    assert desired is not None
    revision = str(canary["revision"])
    listed = (state or {}).get("replicas")
    replicas = [r for r in (listed if isinstance(listed, list) else []) if isinstance(r, Mapping)]
    stable_desired = {k: v for k, v in desired.items() if k != "canary"}
    of_stable = [r for r in replicas if r.get("revision") != revision]
    of_canary = [r for r in replicas if r.get("revision") == revision]
    stable = _status_of(name, stable_desired, {**(state or {}), "replicas": of_stable},
                        endpoint=endpoint, supervisor_alive=supervisor_alive, note=note)
    canary_desired = {**stable_desired, "revision": revision, "replicas": _int(canary.get("replicas"))}
    canary_only = _status_of(name, canary_desired, {**(state or {}), "replicas": of_canary},
                             endpoint=None, supervisor_alive=supervisor_alive)
    return with_canary(stable, _int(canary.get("percent")), canary_only)


def _status_of(
    name: str,
    desired: Mapping[str, Any] | None,
    state: Mapping[str, Any] | None,
    *,
    endpoint: str | None = None,
    supervisor_alive: bool = True,
    note: str | None = None,
) -> ServiceStatus:
    """The status of one revision set of a local service.

    In order: nothing asked for, or a deletion asked or done -> DELETED; the supervisor gone ->
    FAILED; the newest spec not yet picked up -> DEPLOYING; zero replicas -> SCALED_DOWN; every
    desired replica of the current revision ready and no old one left -> READY; a replica of the
    current revision crash looping -> FAILED naming it; rolled out once but fewer ready than
    desired -> DEGRADED; else DEPLOYING with kubectl's progress text. ``note`` (options ignored
    locally) becomes the status message.
    """
    state = state or {}
    listed = state.get("replicas")
    replicas: Sequence[Any] = listed if isinstance(listed, list) else []
    pods = tuple(sorted((pod_info(r) for r in replicas if isinstance(r, Mapping)), key=lambda p: p.name))
    created = _num(state.get("created_at"), _num((desired or {}).get("created_at")))
    revision = str((desired or {}).get("revision_number") or "") or None

    def status(kind: ServiceState, reason: str | None,
               counts: Mapping[str, int] | None = None) -> ServiceStatus:
        counts = counts or {}
        return ServiceStatus(
            name=name, state=kind, desired=counts.get("desired", 0), updated=counts.get("updated", 0),
            ready=counts.get("ready", 0), available=counts.get("ready", 0), revision=revision,
            endpoint=endpoint, created_at=created, pods=pods, reason=reason, message=note,
        )

    if not desired or desired.get("deleted") or state.get("phase") == "deleted":
        return status(ServiceState.DELETED, "deleted" if desired else "no local service of that name")
    current = _text(desired.get("revision"))
    want = _int(desired.get("replicas"), 1)
    live = [p for p in pods if p.phase != "Terminating"]
    mine = [p for p in live if p.revision == current]
    old = [p for p in live if p.revision != current]
    ready = sum(1 for p in live if p.ready)
    counts = {"desired": want, "updated": len(mine), "ready": ready}
    if not supervisor_alive:
        why = _text(state.get("reason")) or "the local supervisor of this service is not running"
        return status(ServiceState.FAILED, why, counts)
    if _int(state.get("observed_generation"), -1) < _int(desired.get("generation")):
        return status(ServiceState.DEPLOYING, "waiting for the supervisor to pick up the new spec", counts)
    if want == 0:
        going = f"{len(pods)} replicas still terminating" if pods else None
        return status(ServiceState.SCALED_DOWN, going, counts)
    if len(mine) >= want and not old and all(p.ready for p in mine):
        return status(ServiceState.READY, None, counts)
    failing = [p for p in mine if p.reason in FAILING]
    if failing:
        text = describe_pod_problem(failing[0])
        if failing[0].reason == "StartError" and failing[0].message:
            text += f": {failing[0].message}"  # which program could not start, and why
        return status(ServiceState.FAILED, text, counts)
    progress = progress_text(want, len(mine), len(old), sum(1 for p in mine if p.ready))
    culprit = next((p for p in mine if not p.ready and p.reason), None)
    if state.get("rolled_out") == current and len(mine) >= want and not old:
        text = f"{ready} of {want} replicas are available"
        if culprit is not None:
            text += f"; {describe_pod_problem(culprit)}"
        return status(ServiceState.DEGRADED, text, counts)
    if culprit is not None and culprit.reason == "Unhealthy":
        problem = describe_pod_problem(culprit)
        progress = f"{progress}; {problem}" if progress else problem
    return status(ServiceState.DEPLOYING, progress, counts)
