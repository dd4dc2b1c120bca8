"""The emulator's controller-manager: Deployment, ReplicaSet, Endpoints and HPA controllers.

They work on the :class:`~.store.Store` directly (as kube-controller-manager works on the API
server) and reproduce what golden files 03, 05f, 09/09b and 10 recorded: ReplicaSet names
``<deployment>-<pod-template-hash>``, rolling updates bounded by maxSurge/maxUnavailable, status
counters in the real order with zeros omitted, the Available/Progressing conditions with their
reasons and messages, ProgressDeadlineExceeded, and the ScalingReplicaSet / SuccessfulCreate /
SuccessfulDelete events.  Garbage collection of dependents is the store's job.

All work runs on one thread fed by store notifications plus a periodic resync (for progress
deadlines); the HPA controller has its own timer thread.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as _dt
import json
import math
import sys
import threading
import time
import traceback
from typing import Any

from .errors import ApiError

Obj = dict[str, Any]

_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"
_RESYNC = 0.5
_METRICS_ERR = (
    "unable to get metrics for resource {r}: unable to fetch metrics from resource metrics API: "
    "the server could not find the requested resource (get pods.metrics.k8s.io)"
)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(s: str) -> float:
    return _dt.datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=_dt.timezone.utc).timestamp()


def pod_template_hash(template: Obj, collision_count: int = 0) -> str:
    """Deterministic ``pod-template-hash`` of a pod template (FNV-1a 32 of its canonical JSON,
    rendered like Kubernetes' ``rand.SafeEncodeString(fmt.Sprint(hash))``)."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count:
        data += str(collision_count).encode()
    h = 0x811C9DC5
    for b in data:
        h ^= b
        h = (h * 0x01000193) & 0xFFFFFFFF
    return "".join(_ALPHANUMS[ord(ch) % len(_ALPHANUMS)] for ch in str(h))


def _int_or_percent(value: Any, total: int, round_up: bool) -> int:
    if value is None:
        value = "25%"
    if isinstance(value, str) and value.endswith("%"):
        pct = float(value[:-1])
        v = total * pct / 100
        return math.ceil(v) if round_up else math.floor(v)
    return int(value)


def _owner_uid(obj: Obj) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("uid")
    return None


def _owner_ref(owner: Obj) -> Obj:
    return {
        "apiVersion": owner.get("apiVersion", ""),
        "kind": owner.get("kind", ""),
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _pod_ready(pod: Obj) -> bool:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


def _pod_active(pod: Obj) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and (pod.get("status") or {}).get("phase") not in (
        "Succeeded",
        "Failed",
    )


def _strip_hash(template: Obj) -> Obj:
    t = copy.deepcopy(template)
    labels = (t.get("metadata") or {}).get("labels")
    if labels:
        labels.pop("pod-template-hash", None)
    return t


def _revision(obj: Obj) -> int:
    try:
        return int((obj["metadata"].get("annotations") or {}).get("deployment.kubernetes.io/revision", "0"))
    except ValueError:
        return 0


def _set_condition(
    conds: list[Obj],
    type_: str,
    status: str,
    reason: str,
    message: str,
    now: str,
    *,
    deployment_style: bool = True,
    touch: bool = False,
) -> list[Obj]:
    """Kubernetes' SetCondition: same status+reason keeps the entry (``touch`` refreshes
    lastUpdateTime); otherwise the old entry is dropped and the new one appended, keeping
    lastTransitionTime when only the reason changed."""
    cur = next((c for c in conds if c["type"] == type_), None)
    if cur is not None and cur["status"] == status and cur.get("reason") == reason:
        if touch or cur.get("message") != message:
            cur["message"] = message
            if deployment_style:
                cur["lastUpdateTime"] = now
        return conds
    cond: Obj = {"type": type_, "status": status}
    if deployment_style:
        cond["lastUpdateTime"] = now
    cond["lastTransitionTime"] = (
        cur["lastTransitionTime"] if cur is not None and cur["status"] == status else now
    )
    cond["reason"] = reason
    cond["message"] = message
    return [c for c in conds if c["type"] != type_] + [cond]


class Controllers:
    """Deployment, ReplicaSet, Endpoints and HorizontalPodAutoscaler controllers over a Store.

    ``Controllers(store, hpa_sync=15.0)``; :meth:`start` subscribes and starts the threads,
    :meth:`stop` ends them.  ``hpa_sync`` is the HPA controller's resync period (15 s on a real
    cluster; the first sync of a new HPA comes one period after its creation)."""

    def __init__(self, store: Any, *, hpa_sync: float = 15.0) -> None:
        self.store = store
        self.hpa_sync = hpa_sync
        self._queue: dict[tuple[str, str, str], None] = {}
        self._cv = threading.Condition()
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []
        self._hpa_next: dict[str, float] = {}

    # -- lifecycle
    def start(self) -> None:
        """Subscribe to the store and start the worker and HPA threads."""
        self.store.subscribe(self._on_change)
        for res in ("deployments", "replicasets", "services"):
            for o in self.store.list(res):
                self._enqueue(res, o["metadata"].get("namespace", ""), o["metadata"]["name"])
        for target, name in ((self._work, "controllers"), (self._hpa_loop, "hpa-controller")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        """Stop the threads (objects stay as they are)."""
        self._stopped.set()
        with contextlib.suppress(Exception):
            self.store.unsubscribe(self._on_change)
        with self._cv:
            self._cv.notify_all()
        for t in self._threads:
            t.join(timeout=5)

    # -- notifications (under the store lock: only enqueue)
    def _enqueue(self, res: str, ns: str, name: str) -> None:
        with self._cv:
            self._queue[(res, ns, name)] = None
            self._cv.notify()

    def _on_change(self, etype: str, resource: str, obj: Obj) -> None:
        md = obj["metadata"]
        ns = md.get("namespace", "")
        if resource in ("deployments", "replicasets", "services"):
            self._enqueue(resource, ns, md["name"])
        if resource in ("replicasets", "pods"):
            for ref in md.get("ownerReferences") or []:
                if ref.get("controller"):
                    kind = {"Deployment": "deployments", "ReplicaSet": "replicasets"}.get(ref.get("kind", ""))
                    if kind:
                        self._enqueue(kind, ns, ref["name"])
        if resource == "pods":
            self._enqueue("endpoints-ns", ns, "")

    # -- worker
    def _work(self) -> None:
        last_resync = 0.0
        while not self._stopped.is_set():
            with self._cv:
                if not self._queue:
                    self._cv.wait(_RESYNC)
                items = list(self._queue)
                self._queue.clear()
            if self._stopped.is_set():
                return
            if time.monotonic() - last_resync >= _RESYNC:
                last_resync = time.monotonic()
                for d in self.store.list("deployments"):
                    items.append(("deployments", d["metadata"]["namespace"], d["metadata"]["name"]))
            for res, ns, name in dict.fromkeys(items):
                try:
                    if res == "deployments":
                        self.sync_deployment(ns, name)
                    elif res == "replicasets":
                        self.sync_replicaset(ns, name)
                    elif res == "services":
                        self.sync_endpoints(ns, name)
                    elif res == "endpoints-ns":
                        for svc in self.store.list("services", ns):
                            self.sync_endpoints(ns, svc["metadata"]["name"])
                except ApiError:
                    # Object changed or went away in between: the next notification retries.
                    pass
                except Exception:
                    sys.stderr.write(f"controllers: sync of {res} {ns}/{name} failed\n")
                    traceback.print_exc()

    def _event(self, obj: Obj, type_: str, reason: str, message: str, source: str) -> None:
        with contextlib.suppress(Exception):
            self.store.record_event(obj["metadata"]["namespace"], obj, type_, reason, message, source)

    # ------------------------------------------------------------------------------ ReplicaSet
    def sync_replicaset(self, ns: str, name: str) -> None:
        """Create/delete pods towards ``spec.replicas`` and write the ReplicaSet status."""
        rs = self.store.get("replicasets", ns, name)
        if rs is None:
            return
        uid = rs["metadata"]["uid"]
        selector = (rs["spec"].get("selector") or {}).get("matchLabels") or {}
        pods = [p for p in self.store.list("pods", ns, selector) if _owner_uid(p) == uid]
        active = [p for p in pods if _pod_active(p)]
        want = int(rs["spec"].get("replicas", 1))
        if not rs["metadata"].get("deletionTimestamp"):
            if len(active) < want:
                tmpl = rs["spec"].get("template") or {}
                tmd = tmpl.get("metadata") or {}
                for _ in range(want - len(active)):
                    pod: Obj = {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {
                            "generateName": f"{name}-",
                            "namespace": ns,
                            "labels": dict(tmd.get("labels") or {}),
                            "ownerReferences": [_owner_ref(rs)],
                        },
                        "spec": copy.deepcopy(tmpl.get("spec") or {}),
                        "status": {"phase": "Pending"},
                    }
                    if tmd.get("annotations"):
                        pod["metadata"]["annotations"] = dict(tmd["annotations"])
                    created = self.store.create("pods", pod)
                    self._event(
                        rs,
                        "Normal",
                        "SuccessfulCreate",
                        f"Created pod: {created['metadata']['name']}",
                        "replicaset-controller",
                    )
                    active.append(created)
            elif len(active) > want:
                # Delete the least useful first: unscheduled, pending, not ready, then newest.
                def rank(p: Obj) -> tuple[int, int, int, str]:
                    st = p.get("status") or {}
                    return (
                        0 if not (p.get("spec") or {}).get("nodeName") else 1,
                        0 if st.get("phase") == "Pending" else 1,
                        1 if _pod_ready(p) else 0,
                        "".join(chr(255 - ord(ch)) for ch in p["metadata"].get("creationTimestamp", "")),
                    )

                victims = sorted(active, key=rank)[: len(active) - want]
                for p in victims:
                    self.store.delete("pods", ns, p["metadata"]["name"])
                    self._event(
                        rs,
                        "Normal",
                        "SuccessfulDelete",
                        f"Deleted pod: {p['metadata']['name']}",
                        "replicaset-controller",
                    )
                names = {p["metadata"]["name"] for p in victims}
                active = [p for p in active if p["metadata"]["name"] not in names]
        ready = sum(1 for p in active if _pod_ready(p))
        status: Obj = {"replicas": len(active)}
        tlabels = ((rs["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {}
        fully = sum(
            1
            for p in active
            if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in tlabels.items())
        )
        if fully:
            status["fullyLabeledReplicas"] = fully
        if ready:
            status["readyReplicas"] = ready
            status["availableReplicas"] = ready  # minReadySeconds is taken as 0
        status["observedGeneration"] = rs["metadata"].get("generation", 1)
        with self.store.lock:
            cur = self.store.get("replicasets", ns, name)
            if cur is not None and cur["metadata"]["uid"] == uid:
                self.store.patch_status("replicasets", ns, name, status)

    # ------------------------------------------------------------------------------ Deployment
    def sync_deployment(self, ns: str, name: str) -> None:
        """One reconcile pass of the Deployment controller (rolling update + status)."""
        d = self.store.get("deployments", ns, name)
        if d is None or d["metadata"].get("deletionTimestamp"):
            return
        uid = d["metadata"]["uid"]
        spec = d["spec"]
        desired = int(spec.get("replicas", 1))
        template = spec.get("template") or {}
        owned = [rs for rs in self.store.list("replicasets", ns) if _owner_uid(rs) == uid]
        new_rs = self._find_new_rs(owned, template)
        old = [rs for rs in owned if new_rs is None or rs["metadata"]["uid"] != new_rs["metadata"]["uid"]]
        strategy = spec.get("strategy") or {}
        ru = strategy.get("rollingUpdate") or {}
        max_surge = _int_or_percent(ru.get("maxSurge"), desired, True)
        max_unavail = _int_or_percent(ru.get("maxUnavailable"), desired, False)
        if max_surge == 0 and max_unavail == 0:
            max_unavail = 1
        recreate = strategy.get("type") == "Recreate"
        if recreate:
            max_surge = 0
        now = _now()
        conds = list((d.get("status") or {}).get("conditions") or [])
        max_rev = max([_revision(rs) for rs in owned] + [0])

        if self._scaling_event(d, owned, new_rs, desired, max_surge):
            self._write_status(ns, name, new_rs["metadata"]["name"] if new_rs else "", max_unavail)
            return
        if new_rs is None:
            h = pod_template_hash(template)
            rs_name = f"{name}-{h}"
            existing = self.store.get("replicasets", ns, rs_name)
            collision = 0
            while existing is not None and _strip_hash(existing["spec"].get("template") or {}) != template:
                collision += 1
                h = pod_template_hash(template, collision)
                rs_name = f"{name}-{h}"
                existing = self.store.get("replicasets", ns, rs_name)
            if recreate:
                start = (
                    0
                    if any(
                        int(rs["spec"].get("replicas", 0)) or (rs.get("status") or {}).get("replicas")
                        for rs in old
                    )
                    else desired
                )
            elif not old or all(int(rs["spec"].get("replicas", 0)) == 0 for rs in old):
                start = desired
            else:
                total = sum(int(rs["spec"].get("replicas", 0)) for rs in old)
                start = max(0, min(desired, desired + max_surge - total))
            tmpl = copy.deepcopy(template)
            tmpl.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = h
            selector = copy.deepcopy(spec.get("selector") or {})
            selector.setdefault("matchLabels", {})["pod-template-hash"] = h
            labels = dict((template.get("metadata") or {}).get("labels") or {})
            labels["pod-template-hash"] = h
            rs_obj: Obj = {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": rs_name,
                    "namespace": ns,
                    "labels": labels,
                    "annotations": {
                        "deployment.kubernetes.io/desired-replicas": str(desired),
                        "deployment.kubernetes.io/max-replicas": str(desired + max_surge),
                        "deployment.kubernetes.io/revision": str(max_rev + 1),
                    },
                    "ownerReferences": [_owner_ref(d)],
                },
                "spec": {
                    "replicas": start,
                    "minReadySeconds": spec.get("minReadySeconds", 0),
                    "selector": selector,
                    "template": tmpl,
                },
                "status": {"replicas": 0},
            }
            if not rs_obj["spec"]["minReadySeconds"]:
                del rs_obj["spec"]["minReadySeconds"]
            new_rs = self.store.create("replicasets", rs_obj)
            if start > 0:
                self._event(
                    d,
                    "Normal",
                    "ScalingReplicaSet",
                    f"Scaled up replica set {rs_name} to {start}",
                    "deployment-controller",
                )
            conds = _set_condition(
                conds,
                "Progressing",
                "True",
                "NewReplicaSetCreated",
                f'Created new replica set "{rs_name}"',
                now,
            )
            self._write_deployment(d, revision=max_rev + 1, status_conditions=conds)
            d = self.store.get("deployments", ns, name) or d
            owned.append(new_rs)
        elif _revision(new_rs) < max_rev:
            # The template went back to an older ReplicaSet: it becomes the newest revision.
            self._annotate_rs(new_rs, {"deployment.kubernetes.io/revision": str(max_rev + 1)})
            conds = _set_condition(
                conds,
                "Progressing",
                "True",
                "FoundNewReplicaSet",
                f'Found new replica set "{new_rs["metadata"]["name"]}"',
                now,
            )
            self._write_deployment(d, revision=max_rev + 1, status_conditions=conds)
            d = self.store.get("deployments", ns, name) or d
        elif (d["metadata"].get("annotations") or {}).get("deployment.kubernetes.io/revision") != str(
            _revision(new_rs)
        ):
            self._write_deployment(d, revision=_revision(new_rs), status_conditions=None)
            d = self.store.get("deployments", ns, name) or d

        new_name = new_rs["metadata"]["name"]
        old = [rs for rs in owned if rs["metadata"]["uid"] != new_rs["metadata"]["uid"]]
        old_active = [rs for rs in old if int(rs["spec"].get("replicas", 0)) > 0]
        new_spec = int(new_rs["spec"].get("replicas", 0))

        # --- scale
        if recreate:
            if old_active:
                for rs in old_active:
                    self._scale(d, rs, 0, max_surge)
            elif not any((rs.get("status") or {}).get("replicas") for rs in old) and new_spec != desired:
                self._scale(d, new_rs, desired, max_surge)
        elif not old_active:
            if new_spec != desired:
                self._scale(d, new_rs, desired, max_surge)
        else:
            all_spec = new_spec + sum(int(rs["spec"].get("replicas", 0)) for rs in old)
            if new_spec < desired:
                room = desired + max_surge - all_spec
                if room > 0:
                    target = new_spec + min(room, desired - new_spec)
                    self._scale(d, new_rs, target, max_surge)
                    new_spec = target
            elif new_spec > desired:
                self._scale(d, new_rs, desired, max_surge)
                new_spec = desired
            all_spec = new_spec + sum(int(rs["spec"].get("replicas", 0)) for rs in old)
            min_available = desired - max_unavail
            new_unavail = new_spec - int((new_rs.get("status") or {}).get("availableReplicas", 0))
            max_down = all_spec - min_available - new_unavail
            if max_down > 0:
                # First old replicas that are not available anyway, then available ones.
                for rs in sorted(old_active, key=lambda r: r["metadata"].get("creationTimestamp", "")):
                    if max_down <= 0:
                        break
                    sp = int(rs["spec"].get("replicas", 0))
                    unavail = sp - int((rs.get("status") or {}).get("availableReplicas", 0))
                    down = min(max_down, max(unavail, 0))
                    if down > 0:
                        self._scale(d, rs, sp - down, max_surge)
                        rs["spec"]["replicas"] = sp - down
                        max_down -= down
                available = sum(int((rs.get("status") or {}).get("availableReplicas", 0)) for rs in owned)
                total_down = min(max_down, available - min_available)
                for rs in sorted(old_active, key=lambda r: r["metadata"].get("creationTimestamp", "")):
                    if total_down <= 0:
                        break
                    sp = int(rs["spec"].get("replicas", 0))
                    down = min(sp, total_down)
                    if down > 0:
                        self._scale(d, rs, sp - down, max_surge)
                        total_down -= down

        self._cleanup_history(d, new_rs)
        self._write_status(ns, name, new_name, max_unavail)

    def _scaling_event(self, d: Obj, owned: list[Obj], new_rs: Obj | None, desired: int,
                       max_surge: int) -> bool:
        """kube-controller-manager's ``isScalingEvent`` then ``sync``/``scale``, which run before
        any rollout: when an active ReplicaSet's ``desired-replicas`` annotation differs from
        ``spec.replicas``, a lone active ReplicaSet is scaled to the new count at once, even an
        old one whose template is no longer the Deployment's (a change of both template and
        replicas in one write first starts pods of the OLD template; the rollout follows in the
        next pass). Several active ReplicaSets are left to the rollout below (the real
        controller scales them proportionally). Returns whether this pass scaled one."""
        if d["spec"].get("paused"):
            return False
        active = [rs for rs in owned if int(rs["spec"].get("replicas", 0)) > 0]
        event = any((rs["metadata"].get("annotations") or {}).get("deployment.kubernetes.io/desired-replicas")
                    not in (None, str(desired)) for rs in active)
        if not event or len(active) != 1:
            return False
        only = active[0]
        self._scale(d, only, desired, max_surge)  # (the annotations follow the count either way)
        return int(only["spec"].get("replicas", 0)) != desired

    def _find_new_rs(self, owned: list[Obj], template: Obj) -> Obj | None:
        matches = [rs for rs in owned if _strip_hash(rs["spec"].get("template") or {}) == template]
        if not matches:
            return None
        return sorted(matches, key=lambda r: r["metadata"].get("creationTimestamp", ""))[0]

    def _scale(self, d: Obj, rs: Obj, to: int, max_surge: int) -> None:
        with self.store.lock:
            cur = self.store.get("replicasets", rs["metadata"]["namespace"], rs["metadata"]["name"])
            if cur is None:
                return
            frm = int(cur["spec"].get("replicas", 0))
            desired = int(d["spec"].get("replicas", 1))
            ann = cur["metadata"].setdefault("annotations", {})
            ann["deployment.kubernetes.io/desired-replicas"] = str(desired)
            ann["deployment.kubernetes.io/max-replicas"] = str(desired + max_surge)
            if frm == to:
                self.store.update("replicasets", cur)
                return
            cur["spec"]["replicas"] = to
            self.store.update("replicasets", cur)
        rs_name = rs["metadata"]["name"]
        if to > frm:
            msg = f"Scaled up replica set {rs_name} to {to}" + (f" from {frm}" if frm else "")
        else:
            msg = f"Scaled down replica set {rs_name} to {to} from {frm}"
        self._event(d, "Normal", "ScalingReplicaSet", msg, "deployment-controller")

    def _annotate_rs(self, rs: Obj, annotations: dict[str, str]) -> None:
        with self.store.lock:
            cur = self.store.get("replicasets", rs["metadata"]["namespace"], rs["metadata"]["name"])
            if cur is None:
                return
            cur["metadata"].setdefault("annotations", {}).update(annotations)
            self.store.update("replicasets", cur)

    def _cleanup_history(self, d: Obj, new_rs: Obj) -> None:
        limit = d["spec"].get("revisionHistoryLimit", 10)
        ns = d["metadata"]["namespace"]
        uid = d["metadata"]["uid"]
        old = [
            rs
            for rs in self.store.list("replicasets", ns)
            if _owner_uid(rs) == uid
            and rs["metadata"]["uid"] != new_rs["metadata"]["uid"]
            and int(rs["spec"].get("replicas", 0)) == 0
            and not (rs.get("status") or {}).get("replicas")
        ]
        excess = len(old) - int(limit)
        for rs in sorted(old, key=_revision)[: max(excess, 0)]:
            self.store.delete("replicasets", ns, rs["metadata"]["name"])

    def _write_deployment(self, d: Obj, *, revision: int, status_conditions: list[Obj] | None) -> None:
        ns, name = d["metadata"]["namespace"], d["metadata"]["name"]
        with self.store.lock:
            cur = self.store.get("deployments", ns, name)
            if cur is None or cur["metadata"]["uid"] != d["metadata"]["uid"]:
                return
            # One write, as in golden 03: the revision annotation and the new condition together.
            cur["metadata"].setdefault("annotations", {})["deployment.kubernetes.io/revision"] = str(revision)
            if status_conditions is not None:
                st = dict(cur.get("status") or {})
                st.pop("conditions", None)
                st["conditions"] = status_conditions
                cur["status"] = st
            self.store.update("deployments", cur)

    def _write_status(self, ns: str, name: str, new_name: str, max_unavail: int) -> None:
        with self.store.lock:
            d = self.store.get("deployments", ns, name)
            if d is None:
                return
            uid = d["metadata"]["uid"]
            owned = [rs for rs in self.store.list("replicasets", ns) if _owner_uid(rs) == uid]
            new_rs = next((rs for rs in owned if rs["metadata"]["name"] == new_name), None)
            desired = int(d["spec"].get("replicas", 1))
            old_st = d.get("status") or {}

            def total(key: str) -> int:
                return sum(int((rs.get("status") or {}).get(key, 0)) for rs in owned)

            replicas = total("replicas")
            updated = int(((new_rs or {}).get("status") or {}).get("replicas", 0))
            ready = total("readyReplicas")
            available = total("availableReplicas")
            unavailable = max(desired - available, 0)
            st: Obj = {"observedGeneration": d["metadata"].get("generation", 1)}
            for key, val in (
                ("replicas", replicas),
                ("updatedReplicas", updated),
                ("readyReplicas", ready),
                ("availableReplicas", available),
                ("unavailableReplicas", unavailable),
            ):
                if val:
                    st[key] = val
            now = _now()
            conds = [dict(c) for c in old_st.get("conditions") or []]
            if available >= desired - max_unavail:
                conds = _set_condition(
                    conds,
                    "Available",
                    "True",
                    "MinimumReplicasAvailable",
                    "Deployment has minimum availability.",
                    now,
                )
            else:
                conds = _set_condition(
                    conds,
                    "Available",
                    "False",
                    "MinimumReplicasUnavailable",
                    "Deployment does not have minimum availability.",
                    now,
                )
            deadline = d["spec"].get("progressDeadlineSeconds", 600)
            complete = (
                updated == desired
                and replicas == desired
                and available == desired
                and st["observedGeneration"] >= d["metadata"].get("generation", 1)
            )
            old_old = int(old_st.get("replicas", 0)) - int(old_st.get("updatedReplicas", 0))
            progressing = (
                updated > int(old_st.get("updatedReplicas", 0))
                or replicas - updated < old_old
                or ready > int(old_st.get("readyReplicas", 0))
                or available > int(old_st.get("availableReplicas", 0))
            )
            prog = next((c for c in conds if c["type"] == "Progressing"), None)
            if deadline is not None and d["spec"].get("paused") is not True:
                if complete:
                    conds = _set_condition(
                        conds,
                        "Progressing",
                        "True",
                        "NewReplicaSetAvailable",
                        f'ReplicaSet "{new_name}" has successfully progressed.',
                        now,
                    )
                elif progressing:
                    conds = _set_condition(
                        conds,
                        "Progressing",
                        "True",
                        "ReplicaSetUpdated",
                        f'ReplicaSet "{new_name}" is progressing.',
                        now,
                        touch=True,
                    )
                elif (
                    prog is not None
                    and prog.get("reason") not in ("NewReplicaSetAvailable", "ProgressDeadlineExceeded")
                    and _parse_time(prog["lastUpdateTime"]) + float(deadline) < time.time()
                ):
                    conds = _set_condition(
                        conds,
                        "Progressing",
                        "False",
                        "ProgressDeadlineExceeded",
                        f'ReplicaSet "{new_name}" has timed out progressing.',
                        now,
                    )
            if conds:
                st["conditions"] = conds
            self.store.patch_status("deployments", ns, name, st)

    # ------------------------------------------------------------------------------ Endpoints
    def sync_endpoints(self, ns: str, name: str) -> None:
        """Keep ``endpoints/NAME`` listing the ready (and not-ready) pod IPs behind a Service."""
        svc = self.store.get("services", ns, name)
        if svc is None:
            with contextlib.suppress(ApiError):
                ep = self.store.get("endpoints", ns, name)
                if (
                    ep is not None
                    and (ep["metadata"].get("labels") or {}).get("endpoints.kubernetes.io/managed-by")
                    == "emulator-endpoints-controller"
                ):
                    self.store.delete("endpoints", ns, name)
            return
        selector = (svc.get("spec") or {}).get("selector")
        if not selector:
            return
        ready, not_ready = [], []
        for p in self.store.list("pods", ns, selector):
            ip = (p.get("status") or {}).get("podIP")
            if not ip or p["metadata"].get("deletionTimestamp"):
                continue
            addr = {
                "ip": ip,
                "nodeName": (p.get("spec") or {}).get("nodeName", ""),
                "targetRef": {
                    "kind": "Pod",
                    "namespace": ns,
                    "name": p["metadata"]["name"],
                    "uid": p["metadata"]["uid"],
                },
            }
            (ready if _pod_ready(p) else not_ready).append(addr)
        ports = []
        for sp in (svc.get("spec") or {}).get("ports") or []:
            port: Obj = {"port": sp.get("targetPort", sp.get("port")), "protocol": sp.get("protocol", "TCP")}
            if sp.get("name"):
                port = {"name": sp["name"], **port}
            if not isinstance(port["port"], int):
                port["port"] = sp.get("port")
            ports.append(port)
        subset: Obj = {}
        if ready:
            subset["addresses"] = ready
        if not_ready:
            subset["notReadyAddresses"] = not_ready
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": {
                    **(svc["metadata"].get("labels") or {}),
                    "endpoints.kubernetes.io/managed-by": "emulator-endpoints-controller",
                },
            },
            "subsets": [{**subset, "ports": ports}] if subset else [],
        }
        with self.store.lock:
            cur = self.store.get("endpoints", ns, name)
            if cur is None:
                self.store.create("endpoints", body)
            else:
                cur["metadata"]["labels"] = body["metadata"]["labels"]
                cur["subsets"] = body["subsets"]
                self.store.update("endpoints", cur)

    # ------------------------------------------------------------------------------ HPA
    def _hpa_loop(self) -> None:
        while not self._stopped.wait(min(0.2, self.hpa_sync)):
            now = time.monotonic()
            for hpa in self.store.list("horizontalpodautoscalers"):
                uid = hpa["metadata"]["uid"]
                due = self._hpa_next.setdefault(uid, now + self.hpa_sync)
                if now < due:
                    continue
                self._hpa_next[uid] = now + self.hpa_sync
                try:
                    self.sync_hpa(hpa["metadata"]["namespace"], hpa["metadata"]["name"])
                except ApiError:
                    pass
                except Exception:
                    traceback.print_exc()

    def sync_hpa(self, ns: str, name: str) -> None:
        """One HPA controller pass.  There is no metrics API, so every metric fails as in golden 10;
        like the real controller, a target outside [minReplicas, maxReplicas] is still clamped
        (that branch needs no metrics) — clamping is all the scaling this emulator does."""
        hpa = self.store.get("horizontalpodautoscalers", ns, name)
        if hpa is None:
            return
        spec = hpa.get("spec") or {}
        ref = spec.get("scaleTargetRef") or {}
        kind = ref.get("kind", "")
        res = {"Deployment": "deployments", "ReplicaSet": "replicasets"}.get(kind)
        old = hpa.get("status") or {}
        conds = [dict(c) for c in old.get("conditions") or []]
        now = _now()
        st: Obj = {}
        target = self.store.get(res, ns, ref.get("name", "")) if res else None
        if target is None:
            group = (
                (ref.get("apiVersion") or "apps/v1").split("/")[0]
                if "/" in (ref.get("apiVersion") or "")
                else ""
            )
            what = f"{res or kind.lower() + 's'}/scale" + (f".{group}" if group else "")
            msg = f'{what} "{ref.get("name", "")}" not found'
            conds = _set_condition(
                conds,
                "AbleToScale",
                "False",
                "FailedGetScale",
                f"the HPA controller was unable to get the target's current scale: {msg}",
                now,
                deployment_style=False,
            )
            st = {
                "desiredReplicas": old.get("desiredReplicas", 0),
                "currentMetrics": None,
                "conditions": conds,
            }
            if old.get("lastScaleTime"):
                st = {"lastScaleTime": old["lastScaleTime"], **st}
            self.store.patch_status("horizontalpodautoscalers", ns, name, st)
            self._event(hpa, "Warning", "FailedGetScale", msg, "horizontal-pod-autoscaler")
            return
        current = int(target["spec"].get("replicas", 1))
        lo = int(spec.get("minReplicas", 1))
        hi = int(spec.get("maxReplicas", lo))
        desired = old.get("desiredReplicas", 0)
        last_scale = old.get("lastScaleTime")
        conds = _set_condition(
            conds,
            "AbleToScale",
            "True",
            "SucceededGetScale",
            "the HPA controller was able to get the target's current scale",
            now,
            deployment_style=False,
        )
        if current == 0 and lo != 0:
            conds = _set_condition(
                conds,
                "ScalingActive",
                "False",
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero",
                now,
                deployment_style=False,
            )
            desired = 0
        elif current > hi or current < lo:
            desired = hi if current > hi else lo
            why = (
                "Current number of replicas above Spec.MaxReplicas"
                if current > hi
                else "Current number of replicas below Spec.MinReplicas"
            )
            with self.store.lock:
                fresh = self.store.get(res, ns, ref["name"])
                if fresh is not None:
                    fresh["spec"]["replicas"] = desired
                    self.store.update(res, fresh)
            last_scale = now
            conds = _set_condition(
                conds,
                "AbleToScale",
                "True",
                "SucceededRescale",
                f"the HPA controller was able to update the target scale to {desired}",
                now,
                deployment_style=False,
            )
            conds = _set_condition(
                conds,
                "ScalingLimited",
                "True",
                "TooManyReplicas" if current > hi else "TooFewReplicas",
                "the desired replica count is more than the maximum replica count"
                if current > hi
                else "the desired replica count is less than the minimum replica count",
                now,
                deployment_style=False,
            )
            self._event(
                hpa,
                "Normal",
                "SuccessfulRescale",
                f"New size: {desired}; reason: {why}",
                "horizontal-pod-autoscaler",
            )
            current_after = desired
            current = current_after
        else:
            metrics = spec.get("metrics") or [{"type": "Resource", "resource": {"name": "cpu"}}]
            errors = []
            for m in metrics:
                mtype = m.get("type", "Resource")
                if mtype in ("Resource", "ContainerResource"):
                    r = (m.get("resource") or m.get("containerResource") or {}).get("name", "cpu")
                    errors.append((r, f"failed to get {r} utilization: {_METRICS_ERR.format(r=r)}"))
                else:
                    errors.append(
                        (mtype, f"unable to get metric of type {mtype}: no metrics API in the emulator")
                    )
            first_kind, first = errors[0]
            reason = (
                "FailedGetResourceMetric"
                if metrics[0].get("type", "Resource") == "Resource"
                else f"FailedGet{metrics[0].get('type')}Metric"
            )
            conds = _set_condition(
                conds,
                "ScalingActive",
                "False",
                reason,
                f"the HPA was unable to compute the replica count: {first}",
                now,
                deployment_style=False,
            )
            for _k, err in errors:
                self._event(hpa, "Warning", reason, err, "horizontal-pod-autoscaler")
            self._event(
                hpa,
                "Warning",
                "FailedComputeMetricsReplicas",
                f"invalid metrics ({len(errors)} invalid out of {len(metrics)}), first error is: "
                f"failed to get {first_kind} resource metric value: {first}",
                "horizontal-pod-autoscaler",
            )
        if last_scale:
            st["lastScaleTime"] = last_scale
        st["currentReplicas"] = current
        st["desiredReplicas"] = desired
        st["currentMetrics"] = None
        st["conditions"] = conds
        self.store.patch_status("horizontalpodautoscalers", ns, name, st)
