"""Pure parsing of Kubernetes objects (dicts as the API returns them) into the serving model.

Rules follow what a real API server 1.28 sends (the golden transcripts): counters that are zero
are omitted, conditions are looked up by type (their order moves), and a crash-looping container
shows ``terminated`` for most of each back-off and ``waiting: CrashLoopBackOff`` only at the next
kubelet sync, so both count as crashing once the container has restarted.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..core.model import EventInfo, PodInfo, ServiceState, ServiceStatus
from ..serving.status import FAILING_WAITING, TERMINAL_PHASES, describe_pod_problem
from .fetch import FETCH_CONTAINER, fetch_failure

REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
TEMPLATE_HASH_LABEL = "pod-template-hash"
MAX_EVENTS = 20
EVENT_WINDOW_S = 900.0  # with ``now``: Warning events older than this are not "recent"

_STARTING_WAITING = frozenset({"ContainerCreating", "PodInitializing"})
_CREATING_EVENTS = ("FailedMount", "FailedAttachVolume", "FailedCreatePodSandBox")
_PROBE_FAILED = re.compile(r"(Readiness|Startup|Liveness) probe failed: (.*)", re.DOTALL)
_NEW_RS = re.compile(r'(?:replica set|ReplicaSet) "([^"]+)"')
_RFC3339 = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(\.\d+)?([Zz]|[+-]\d\d:?\d\d)?"
)
# Kubernetes names generated objects with its "safe" alphabet (no vowels, no 0, 1 or 3), so an
# owned ReplicaSet or pod of Deployment D is D-<hash>[-<suffix>], and "web-api" is not web's.
_SAFE = "[bcdfghjklmnpqrstvwxz2456789]"


# --- small helpers ---------------------------------------------------------------------------


def _get(obj: Any, *path: str) -> Any:
    for step in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(step)
    return obj


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def parse_time(text: Any) -> float | None:
    """RFC 3339 (``2026-12-02T17:15:27Z``, fractions up to nanoseconds, offsets) -> epoch seconds."""
    if not isinstance(text, str):
        return None
    match = _RFC3339.fullmatch(text.strip())
    if not match:
        return None
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    try:
        epoch = float(calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0)))
    except (ValueError, OverflowError):
        return None
    if match.group(7):
        epoch += float("0" + match.group(7))
    zone = match.group(8)
    if zone and zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        epoch -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return epoch


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    """The condition of that type, wherever it sits in the array."""
    for cond in _get(obj, "status", "conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == kind:
            return cond
    return None


def _event_time(event: Mapping[str, Any]) -> float | None:
    for key in ("lastTimestamp", "eventTime", "firstTimestamp"):
        stamp = parse_time(event.get(key))
        if stamp is not None:
            return stamp
    series = parse_time(_get(event, "series", "lastObservedTime"))
    return series if series is not None else parse_time(_get(event, "metadata", "creationTimestamp"))


def _event_count(event: Mapping[str, Any]) -> int:
    return max(1, _int(event.get("count")), _int(_get(event, "series", "count")))


def _events_about(events: Iterable[Mapping[str, Any]], kind: str, name: str, uid: str | None) -> list[Any]:
    out = []
    for event in events:
        involved = event.get("involvedObject") if isinstance(event, Mapping) else None
        if not isinstance(involved, Mapping) or involved.get("kind") != kind or involved.get("name") != name:
            continue
        if uid and involved.get("uid") and involved.get("uid") != uid:
            continue  # an earlier object with the same name (Events outlive their objects)
        out.append(event)
    out.sort(key=lambda e: _event_time(e) or 0.0)
    return out


# --- pods ------------------------------------------------------------------------------------


def _container_statuses(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    status = pod.get("status") if isinstance(pod.get("status"), Mapping) else {}
    assert isinstance(status, Mapping)
    out: list[Mapping[str, Any]] = []
    for key in ("initContainerStatuses", "containerStatuses"):
        for c in status.get(key) or ():
            if not isinstance(c, Mapping):
                continue
            term = _get(c, "state", "terminated")
            if key == "initContainerStatuses" and isinstance(term, Mapping) and _exit_of(term) == 0:
                continue  # an init container that completed (golden 13a) is no reason for anything
            out.append(c)
    return out


def _exit_of(term: Mapping[str, Any]) -> int | None:
    code = term.get("exitCode")
    return code if isinstance(code, int) and not isinstance(code, bool) else None



def _crash_loop(cstatus: Mapping[str, Any]) -> tuple[str, str | None, int | None] | None:
    """(reason, message, exit code) of a crash-looping container, else None.

    Crash looping: restarted at least once and now terminated or waiting in CrashLoopBackOff.
    The kubelet's back-off message (which names the pod's UID and changes with every back-off)
    is left out, so the pod row reads the same in every phase; the restart count says how long.
    """
    if _int(cstatus.get("restartCount")) < 1:
        return None
    term = _get(cstatus, "state", "terminated")
    waiting = _get(cstatus, "state", "waiting")
    if not isinstance(term, Mapping):
        if not isinstance(waiting, Mapping) or waiting.get("reason") != "CrashLoopBackOff":
            return None
        term = _get(cstatus, "lastState", "terminated")
    code = _exit_of(term) if isinstance(term, Mapping) else None
    said = _str(waiting.get("message")) if isinstance(waiting, Mapping) else None
    if isinstance(term, Mapping) and term.get("reason") == "OOMKilled":
        text = "killed for using more memory than its limit; restarting with back-off"
        return "OOMKilled", text + (f" ({said})" if said else ""), code
    if code == 0:
        return "CrashLoopBackOff", "the program exited (code 0), but a service must keep running", code
    return "CrashLoopBackOff", None, code


def _fetch_failed(pod: Mapping[str, Any], cstatus: Mapping[str, Any]) -> str | None:
    """One line for a failed ``fetch-model`` init container (k8s/fetch.py), from its termination
    message (the end of its log); None for any other container."""
    spec = pod.get("spec")
    if cstatus.get("name") != FETCH_CONTAINER or not isinstance(spec, Mapping):
        return None
    inits = spec.get("initContainers")
    if not isinstance(inits, list) or not any(
            isinstance(c, Mapping) and c.get("name") == FETCH_CONTAINER for c in inits):
        return None
    term = _get(cstatus, "state", "terminated")
    if not isinstance(term, Mapping) or _exit_of(term) == 0:
        term = _get(cstatus, "lastState", "terminated")
    if not isinstance(term, Mapping) or _exit_of(term) == 0:
        return None
    return fetch_failure(_str(term.get("message")), spec, _exit_of(term))


def pod_info(pod: Mapping[str, Any], events: Sequence[Mapping[str, Any]] = ()) -> PodInfo:
    """One pod (and the Events about it) -> PodInfo.

    ``reason``/``message`` say why the pod is not ready, first match of: a container that has
    restarted and is terminated or in CrashLoopBackOff -> ``CrashLoopBackOff`` with its last exit
    code (``OOMKilled`` after an OOM kill), the same in every phase of the back-off; a container
    waiting for a failing reason (ErrImagePull, ImagePullBackOff, ErrImageNeverPull,
    CreateContainerConfigError, ...) with the kubelet's message; a terminated container (OOMKilled,
    Error, Completed) with its exit code; ``PodScheduled=False`` (Unschedulable) with the
    scheduler's message; failing
    probes (``Unhealthy`` from the Events); ContainerCreating (with a FailedMount event's words).
    A pod stopped for good (phase Failed or Succeeded) with a reason of its own (``Evicted``
    and the kubelet's "The node was low on resource: memory. ...") has that instead.
    A ready or terminating pod has no reason.
    """
    meta = pod.get("metadata") if isinstance(pod.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    name = str(meta.get("name") or "?")
    terminating = bool(meta.get("deletionTimestamp"))
    phase = "Terminating" if terminating else (_str(_get(pod, "status", "phase")) or "Pending")
    ready_cond = _condition(pod, "Ready")
    ready = bool(ready_cond and ready_cond.get("status") == "True")
    statuses = _container_statuses(pod)
    restarts = sum(_int(c.get("restartCount")) for c in statuses)
    labels = meta.get("labels") if isinstance(meta.get("labels"), Mapping) else {}
    assert isinstance(labels, Mapping)

    exit_code: int | None = None
    for cstatus in statuses:
        term = _get(cstatus, "state", "terminated") or _get(cstatus, "lastState", "terminated")
        if isinstance(term, Mapping) and _exit_of(term) is not None:
            exit_code = _exit_of(term)
            break

    reason: str | None = None
    message: str | None = None
    pod_reason = _str(_get(pod, "status", "reason"))
    if not ready and not terminating and phase in TERMINAL_PHASES and pod_reason:
        # Stopped for good for a reason of the pod's own (Evicted, OutOfmemory, Shutdown...): that,
        # not the exit code its containers got when the kubelet stopped them.
        said = _str(_get(pod, "status", "message"))
        reason, message = pod_reason, " ".join(said.split()) if said else None
    elif not ready and not terminating:
        reason, message, code = _not_ready_reason(pod, statuses, name, _str(meta.get("uid")), events)
        if code is not None:
            exit_code = code
    return PodInfo(
        name=name,
        phase=phase,
        ready=ready,
        restarts=restarts,
        node=_str(_get(pod, "spec", "nodeName")),
        started_at=parse_time(meta.get("creationTimestamp")),
        reason=reason,
        message=message,
        exit_code=exit_code,
        revision=_str(labels.get(TEMPLATE_HASH_LABEL)),
    )


def _not_ready_reason(
    pod: Mapping[str, Any],
    statuses: Sequence[Mapping[str, Any]],
    name: str,
    uid: str | None,
    events: Sequence[Mapping[str, Any]],
) -> tuple[str | None, str | None, int | None]:
    # 1. a container that terminated and was restarted is crash looping, whichever phase of the
    # back-off the kubelet shows (terminated: Error for most of it, CrashLoopBackOff at its end).
    for cstatus in statuses:
        crash = _crash_loop(cstatus)
        if crash is not None:
            fetch = _fetch_failed(pod, cstatus)  # --model-from s3://: say which key, which Secret
            return (crash[0], fetch, crash[2]) if fetch else crash
    # 2. a container waiting for a reason other than plain creation
    for cstatus in statuses:
        waiting = _get(cstatus, "state", "waiting")
        if not isinstance(waiting, Mapping):
            continue
        why = _str(waiting.get("reason"))
        if why is None or why in _STARTING_WAITING:
            continue
        return why, _str(waiting.get("message")), None
    # 3. a container that has terminated (the first exit, or for good)
    for cstatus in statuses:
        term = _get(cstatus, "state", "terminated")
        if isinstance(term, Mapping):
            code = _exit_of(term)
            why = _str(term.get("reason")) or "Terminated"
            said = _fetch_failed(pod, cstatus) or _str(term.get("message")) or (
                f"exit code {code}" if code is not None else None)
            return why, said, code
    # 4. not scheduled
    scheduled = _condition(pod, "PodScheduled")
    if scheduled and scheduled.get("status") == "False":
        return _str(scheduled.get("reason")) or "Unschedulable", _str(scheduled.get("message")), None
    mine = _events_about(events, "Pod", name, uid)
    # 5. failing probes
    running = any(isinstance(_get(c, "state", "running"), Mapping) for c in statuses)
    if running:
        for event in reversed(mine):
            match = _PROBE_FAILED.match(str(event.get("message") or ""))
            if event.get("reason") == "Unhealthy" and match:
                return "Unhealthy", f"{match.group(1).lower()} probe failing: {match.group(2).strip()}", None
    # 6. still being created
    creating = any(_get(c, "state", "waiting", "reason") in _STARTING_WAITING for c in statuses)
    if creating or (scheduled and scheduled.get("status") == "True" and not statuses):
        waiting_reason = next(
            (str(_get(c, "state", "waiting", "reason")) for c in statuses
             if _get(c, "state", "waiting", "reason") in _STARTING_WAITING),
            "ContainerCreating",
        )
        trouble = [e for e in mine if e.get("type") == "Warning" and e.get("reason") in _CREATING_EVENTS]
        said = _str(trouble[-1].get("message")) if trouble else None
        return waiting_reason, said, None
    return None, None, None


def _is_failing(pod: PodInfo) -> bool:
    if pod.phase == "Terminating":
        return False
    if pod.reason in FAILING_WAITING or pod.reason == "Unschedulable":
        return True
    # A container that terminated and was restarted is crash looping, even between back-offs.
    return pod.reason in ("OOMKilled", "Error", "Completed", "Terminated") and pod.restarts > 0


# --- the service -----------------------------------------------------------------------------


def current_template_hash(deployment: Mapping[str, Any]) -> str | None:
    """The pod-template hash of the Deployment's newest ReplicaSet, read from the Progressing
    condition's message (``Created new replica set "web-77bdb6c4fb"``, ``ReplicaSet "web-…" is
    progressing.``); ``None`` when no condition names one yet."""
    cond = _condition(deployment, "Progressing")
    name = str(_get(deployment, "metadata", "name") or "")
    match = _NEW_RS.search(str(cond.get("message") or "")) if cond else None
    if not match or not name or not match.group(1).startswith(name + "-"):
        return None
    return match.group(1)[len(name) + 1:]


def _related(names: set[str], deployment: str | None, pod_names: set[str]) -> re.Pattern[str]:
    alts = [re.escape(n) for n in sorted(names | pod_names)]
    if deployment:
        dep = re.escape(deployment)
        alts.append(f"{dep}-{_SAFE}{{5,10}}(?:-{_SAFE}{{5}})?")
    return re.compile("|".join(alts) if alts else "(?!)")


def _recent_warnings(
    events: Iterable[Mapping[str, Any]],
    pattern: re.Pattern[str],
    *,
    since: float | None,
) -> tuple[EventInfo, ...]:
    latest_by_uid: dict[str, Mapping[str, Any]] = {}
    anonymous: list[Mapping[str, Any]] = []
    for event in events:
        if not isinstance(event, Mapping) or event.get("type") != "Warning":
            continue
        involved = event.get("involvedObject")
        if not isinstance(involved, Mapping) or not pattern.fullmatch(str(involved.get("name") or "")):
            continue
        stamp = _event_time(event)
        if since is not None and stamp is not None and stamp < since:
            continue
        uid = _str(_get(event, "metadata", "uid"))
        if uid is None:
            anonymous.append(event)
        elif uid not in latest_by_uid or _event_count(event) >= _event_count(latest_by_uid[uid]):
            latest_by_uid[uid] = event  # the same Event MODIFIED with count+1: keep the newest copy
    grouped: dict[tuple[str, str], tuple[Mapping[str, Any], int]] = {}
    for event in [*latest_by_uid.values(), *anonymous]:
        involved = event["involvedObject"]
        key = (str(event.get("reason") or ""), f"{involved.get('kind')}/{involved.get('name')}")
        newest, count = grouped.get(key, (event, 0))
        if (_event_time(event) or 0.0) >= (_event_time(newest) or 0.0):
            newest = event
        grouped[key] = (newest, count + _event_count(event))
    infos = [
        EventInfo(
            type="Warning",
            reason=reason,
            message=" ".join(str(newest.get("message") or "").split()),
            object=obj,
            count=count,
            at=_event_time(newest),
        )
        for (reason, obj), (newest, count) in grouped.items()
    ]
    infos.sort(key=lambda e: (e.at or 0.0, e.object, e.reason))
    return tuple(infos[-MAX_EVENTS:])


def _progress_text(desired: int, replicas: int, updated: int, available: int) -> str | None:
    """kubectl's rollout-status wording, or None when the rollout is done."""
    if updated < desired:
        return f"{updated} out of {desired} new replicas have been updated"
    if replicas > updated:
        return f"{replicas - updated} old replicas are pending termination"
    if available < updated:
        return f"{available} of {updated} updated replicas are available"
    return None


def service_status(
    name: str,
    deployment: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]],
    *,
    endpoint: str | None = None,
    now: float | None = None,
    template_hash: str | None = None,
) -> ServiceStatus:
    """A service's Deployment, pods and Events -> ServiceStatus.

    In order: no Deployment (or one being deleted) -> DELETED; spec not yet observed by the
    controller -> DEPLOYING; zero replicas desired -> SCALED_DOWN; kubectl's rollout rule met
    (observedGeneration >= generation, updated == available == desired, no old replica left) ->
    READY; ``ProgressDeadlineExceeded`` -> FAILED; a pod of the current revision crash looping,
    unable to get its image, misconfigured, unschedulable or OOM-killed -> FAILED naming that pod;
    rolled out but fewer available than desired (and no new pod on its way) -> DEGRADED; else
    DEPLOYING with kubectl's progress text. A pod of the current revision that stopped for good
    (Evicted) within EVENT_WINDOW_S is named after that text (it is why replacements start); it
    is never a replica (the counts come from the Deployment) nor a FAILED service.
    ``template_hash`` names the current revision's pods; by default it is read from the
    Progressing condition (all pods count when it is unknown).
    ``events`` are reduced to recent Warning events about the service's objects (deduplicated by
    reason and object, newest last, at most MAX_EVENTS; with ``now``, none older than
    EVENT_WINDOW_S).
    """
    dep_name = _str(_get(deployment, "metadata", "name")) if deployment else None
    pod_events = [e for e in events if isinstance(e, Mapping)]
    parsed = (pod_info(p, pod_events) for p in pods if isinstance(p, Mapping))
    infos = tuple(sorted(parsed, key=lambda p: p.name))
    created = parse_time(_get(deployment, "metadata", "creationTimestamp")) if deployment else None
    floors = [now - EVENT_WINDOW_S] if now is not None else []
    if created is not None:
        floors.append(created - 1.0)  # Events outlive their objects: drop those of an earlier namesake
    since = max(floors) if floors else None
    pattern = _related({name} | ({dep_name} if dep_name else set()), dep_name, {p.name for p in infos})
    recent = _recent_warnings(pod_events, pattern, since=since)

    def status(
        state: ServiceState, reason: str | None, counts: Mapping[str, int] | None = None
    ) -> ServiceStatus:
        counts = counts or {}
        return ServiceStatus(
            name=name, state=state, revision=revision, endpoint=endpoint, created_at=created,
            pods=infos, events=recent, reason=reason, desired=counts.get("desired", 0),
            updated=counts.get("updated", 0), ready=counts.get("ready", 0),
            available=counts.get("available", 0),
        )

    revision: str | None = None
    if deployment is None:  # the row and the widget read "deleted"; a deleted service has no endpoint
        return replace(status(ServiceState.DELETED, "deleted"), endpoint=None)
    revision = _str(_get(deployment, "metadata", "annotations", REVISION_ANNOTATION))
    spec_replicas = _get(deployment, "spec", "replicas")
    desired = spec_replicas if isinstance(spec_replicas, int) and not isinstance(spec_replicas, bool) else 1
    replicas = _int(_get(deployment, "status", "replicas"))
    updated = _int(_get(deployment, "status", "updatedReplicas"))
    ready = _int(_get(deployment, "status", "readyReplicas"))
    available = _int(_get(deployment, "status", "availableReplicas"))
    if any(p.phase in TERMINAL_PHASES for p in infos):
        # The pod watch is ahead of the controllers: a pod just evicted is still counted ready by
        # the Deployment's status until its ReplicaSet catches up. Not a ready replica here.
        seen = sum(1 for p in infos if p.ready and p.phase not in (*TERMINAL_PHASES, "Terminating"))
        ready, available = min(ready, seen), min(available, seen)
    counts = {"desired": desired, "updated": updated, "ready": ready, "available": available}
    if _get(deployment, "metadata", "deletionTimestamp"):
        return status(ServiceState.DELETED, "the Deployment is being deleted", counts)

    generation = _int(_get(deployment, "metadata", "generation"))
    observed = _int(_get(deployment, "status", "observedGeneration"))
    if observed < generation:
        return status(ServiceState.DEPLOYING, "waiting for the new spec to be observed", counts)
    if desired == 0:
        pending = f"{replicas} replicas still terminating" if replicas else None
        return status(ServiceState.SCALED_DOWN, pending, counts)

    progress = _progress_text(desired, replicas, updated, available)
    if progress is None:
        return status(ServiceState.READY, None, counts)

    current = template_hash or current_template_hash(deployment)
    live = [p for p in infos if p.phase != "Terminating"]
    mine = [p for p in live if current is None or p.revision == current]
    failing = [p for p in mine if _is_failing(p)]
    progressing = _condition(deployment, "Progressing")
    if progressing and progressing.get("reason") == "ProgressDeadlineExceeded":
        text = "the rollout exceeded its progress deadline"
        said = _str(progressing.get("message"))
        if said:
            text += f" ({said.rstrip('.')})"
        culprit = failing[0] if failing else next((p for p in mine if p.reason), None)
        if culprit:
            text += f"; {describe_pod_problem(culprit)}"
        return status(ServiceState.FAILED, text, counts)
    if failing:
        return status(ServiceState.FAILED, describe_pod_problem(failing[0]), counts)

    rolled_out = bool(progressing and progressing.get("reason") == "NewReplicaSetAvailable")
    starting = any(p.phase == "Pending" for p in mine)
    stopped = {str(_get(p, "metadata", "name")) for p in pods if isinstance(p, Mapping)
               and _recently_stopped(p, now)}
    # A replica that stopped for good (evicted) is why the others are being replaced.
    evicted = [p for p in mine if p.name in stopped and p.reason]
    culprit = next((p for p in mine if not p.ready and p.reason and p.phase not in TERMINAL_PHASES),
                   evicted[0] if evicted else None)
    if rolled_out and updated >= desired and replicas <= updated and not starting:
        text = f"{available} of {desired} replicas are available"
        if culprit:
            text += f"; {describe_pod_problem(culprit)}"
        return status(ServiceState.DEGRADED, text, counts)

    if culprit and culprit.reason == "Unhealthy":
        progress += f"; {describe_pod_problem(culprit)}"
    elif evicted:
        progress += f"; {describe_pod_problem(evicted[0])}"
        if len(evicted) > 1:
            progress += f" (and {len(evicted) - 1} more)"
    return status(ServiceState.DEPLOYING, progress, counts)


def _recently_stopped(pod: Mapping[str, Any], now: float | None) -> bool:
    """A pod that stopped for good for a reason of its own (Evicted), within EVENT_WINDOW_S of
    ``now`` (when it stopped: its DisruptionTarget or Ready condition's transition)."""
    if _str(_get(pod, "status", "phase")) not in TERMINAL_PHASES or not _str(_get(pod, "status", "reason")):
        return False
    if now is None:
        return True
    cond = _condition(pod, "DisruptionTarget") or _condition(pod, "Ready")
    when = parse_time(cond.get("lastTransitionTime")) if cond else None
    return when is None or when >= now - EVENT_WINDOW_S


# --- Ingress --------------------------------------------------------------------------------

DEFAULT_CLASS_ANNOTATION = "ingressclass.kubernetes.io/is-default-class"


def _items(value: Any) -> list[Any]:
    """The mappings of a list field (a missing or malformed field: none)."""
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def ingress_classes(items: Sequence[Mapping[str, Any]]) -> dict[str, bool]:
    """IngressClass objects (a list's ``items``) -> {name: is the cluster's default}."""
    out: dict[str, bool] = {}
    for item in items:
        name = _str(_get(item, "metadata", "name"))
        if name:
            out[name] = _get(item, "metadata", "annotations", DEFAULT_CLASS_ANNOTATION) == "true"
    return out


def ingress_endpoint(ingress: Mapping[str, Any] | None, classes: Mapping[str, bool] | None = None,
                     *, ingress_class: str | None = None) -> str:
    """What a service routed through an Ingress shows as its endpoint.

    Once the controller has written an address into ``status.loadBalancer.ingress``:
    ``https://HOST/PATH (address IP-or-HOSTNAME)`` (``http`` without TLS for that host; ``+N more``
    when there are more rules). Before that: ``pending: no address from the ingress controller yet
    (class X)`` and why, as far as ``classes`` (:func:`ingress_classes`; None when the IngressClasses
    could not be read) tells: the class does not exist, there is no class and no default one, or
    its controller has not answered. ``ingress_class`` is the class asked for, used while the
    Ingress itself is not seen yet (``ingress`` None).
    """
    spec = _get(ingress, "spec")
    cls = _str(_get(spec, "ingressClassName")) if ingress is not None else ingress_class
    urls: list[str] = []
    tls_hosts: set[str] = set()
    for entry in _items(_get(spec, "tls")):
        hosts = entry.get("hosts")
        tls_hosts.update(h for h in hosts if isinstance(h, str)) if isinstance(hosts, list) else None
    for rule in _items(_get(spec, "rules")):
        host = _str(rule.get("host")) or "*"
        scheme = "https" if host in tls_hosts else "http"
        for path in _items(_get(rule, "http", "paths")):
            urls.append(f"{scheme}://{host}{_str(path.get('path')) or '/'}")
    addresses = [a for a in (_str(lb.get("ip")) or _str(lb.get("hostname"))
                             for lb in _items(_get(ingress, "status", "loadBalancer", "ingress"))) if a]
    if urls and addresses:
        more = f" +{len(urls) - 1} more" if len(urls) > 1 else ""
        return f"{urls[0]}{more} (address {', '.join(addresses)})"
    shown_class = f"class {cls}" if cls else "no ingressClassName"
    head = f"pending: no address from the ingress controller yet ({shown_class})"
    if ingress is None:
        return f"{head}: the Ingress is not seen yet"
    if classes is None:
        why = (f"is a controller for {cls} running? (kubectl get ingressclass; the IngressClasses "
               "could not be read here)" if cls else "no class is set, so the cluster's default "
               "IngressClass must take it (kubectl get ingressclass)")
    elif cls and cls not in classes:
        known = ", ".join(sorted(classes)) or "none"
        why = f"no IngressClass {cls} exists in the cluster (there are: {known}), so no controller takes it"
    elif not cls:
        defaults = [name for name, default in classes.items() if default]
        why = (f"the default IngressClass {defaults[0]}'s controller has not answered" if defaults else
               "no class is set and the cluster has no default IngressClass, so no controller takes it; "
               "set ingress_class in the profile")
    else:
        why = f"IngressClass {cls} exists; its controller has not reported an address (still provisioning?)"
    return f"{head}: {why}"
