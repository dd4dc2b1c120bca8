"""In-memory object store of the Kubernetes API emulator.

Contract shared by the API server, the controllers and the kubelet
-----------------------------------------------------------------
* Objects are plain JSON dicts shaped like the real API objects (``kind``, ``apiVersion``,
  ``metadata``, ``spec``, ``status``).  Every method returns deep copies; the store never hands out
  its own dicts.
* ``resource`` is always the lowercase plural (``pods``, ``deployments``, ``replicasets``,
  ``services``, ``configmaps``, ``secrets``, ``events``, ``horizontalpodautoscalers``,
  ``namespaces``, ``endpoints``, ``ingresses``, ``ingressclasses``).  See :data:`RESOURCES`.
* ``resourceVersion`` is one global integer counter (rendered as a string), bumped by every write.
* ``store.lock`` is a public ``RLock``.  Hold it around a read-modify-write (``get`` then
  ``update``) so that no other writer slips in between.
* ``subscribe(fn)``: ``fn(event_type, resource, obj)`` runs synchronously, under the lock, after
  every change (``ADDED``/``MODIFIED``/``DELETED``).  ``obj`` is shared between subscribers, do not
  mutate it.  Callbacks must only enqueue work and return; they must never block or call back into
  the store from another thread while waiting.
* Controllers should ignore (not recreate/adopt for) objects that carry ``metadata.deletionTimestamp``.

Pod deletion (graceful termination)
-----------------------------------
* Without a registered terminator, ``delete("pods", ...)`` removes the pod at once (``DELETED``).
* A kubelet calls ``store.set_pod_terminator(fn)``.  From then on ``delete("pods", ns, name)`` sets
  ``metadata.deletionTimestamp`` (now + grace) and ``deletionGracePeriodSeconds``, emits
  ``MODIFIED`` and calls ``fn(pod)`` (under the lock: only enqueue!).  The kubelet stops the
  process, may write the final status with ``patch_status`` and then calls
  ``store.remove("pods", ns, name)``, which emits ``DELETED`` and runs garbage collection.
  A second ``delete`` of a terminating pod changes nothing and does not call ``fn`` again.

Garbage collection
------------------
Objects whose ``metadata.ownerReferences[].uid`` names a deleted owner are deleted too
(``Background``, the default), orphaned (``Orphan``: the ownerReference is dropped), or, with
``Foreground``, the owner gets ``deletionTimestamp``, ``deletionGracePeriodSeconds: 0`` and
``finalizers: ["foregroundDeletion"]`` (``MODIFIED``) and is only removed (``DELETED``) once all its
dependents are gone.  Deleting a namespace marks it ``Terminating``, deletes everything in it and
removes it when it is empty.

Watch history
-------------
Every change is kept in a bounded history ``(rv, type, resource, obj)``.  :meth:`Store.watch`
replays what a watcher missed since a resourceVersion; an RV older than the history window (see
:meth:`Store.compact`) raises ``ApiError(410, "Expired", "too old resource version: X (Y)")``.
"""

from __future__ import annotations

import copy
import datetime as _dt
import queue
import secrets as _secrets
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .errors import ApiError, already_exists, conflict_modified, gone, not_found

Obj = dict[str, Any]
Subscriber = Callable[[str, str, Obj], None]


@dataclass(frozen=True)
class ResourceInfo:
    """Static facts about one served resource type."""

    plural: str
    kind: str
    group: str  # "" for the core group
    version: str
    namespaced: bool = True
    has_generation: bool = False
    short_names: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


RESOURCES: dict[str, ResourceInfo] = {
    r.plural: r
    for r in (
        ResourceInfo("namespaces", "Namespace", "", "v1", namespaced=False, short_names=("ns",)),
        ResourceInfo("pods", "Pod", "", "v1", short_names=("po",)),
        ResourceInfo("services", "Service", "", "v1", short_names=("svc",)),
        ResourceInfo("endpoints", "Endpoints", "", "v1", short_names=("ep",)),
        ResourceInfo("configmaps", "ConfigMap", "", "v1", short_names=("cm",)),
        ResourceInfo("secrets", "Secret", "", "v1"),
        ResourceInfo("events", "Event", "", "v1", short_names=("ev",)),
        ResourceInfo("serviceaccounts", "ServiceAccount", "", "v1", short_names=("sa",)),
        ResourceInfo("deployments", "Deployment", "apps", "v1", has_generation=True, short_names=("deploy",)),
        ResourceInfo("replicasets", "ReplicaSet", "apps", "v1", has_generation=True, short_names=("rs",)),
        ResourceInfo("ingresses", "Ingress", "networking.k8s.io", "v1", has_generation=True,
                     short_names=("ing",)),
        ResourceInfo("ingressclasses", "IngressClass", "networking.k8s.io", "v1", namespaced=False,
                     has_generation=True),
        ResourceInfo(
            "horizontalpodautoscalers",
            "HorizontalPodAutoscaler",
            "autoscaling",
            "v2",
            has_generation=False,
            short_names=("hpa",),
        ),
    )
}


def now_rfc3339(offset_s: float = 0.0) -> str:
    """UTC time in RFC3339 with second precision and a ``Z`` suffix, as the API server writes it."""
    t = _dt.datetime.now(_dt.timezone.utc) + _dt.timedelta(seconds=offset_s)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _key(obj: Obj) -> tuple[str, str]:
    md = obj.get("metadata") or {}
    return (md.get("namespace") or "", md.get("name") or "")


def _strip_volatile(obj: Obj) -> Obj:
    """The object minus fields that a write itself changes, to detect no-op writes."""
    o = copy.deepcopy(obj)
    md = o.get("metadata") or {}
    md.pop("resourceVersion", None)
    md.pop("generation", None)
    return o


def labels_match(labels: dict[str, str] | None, selector: dict[str, str] | None) -> bool:
    """Equality-based label selector (every key/value of ``selector`` is in ``labels``)."""
    if not selector:
        return True
    labels = labels or {}
    return all(labels.get(k) == v for k, v in selector.items())


class Watcher:
    """A live subscription to one resource type (optionally one namespace).

    Items of :attr:`queue` are ``(event_type, obj)`` tuples; ``None`` means the store closed it."""

    def __init__(self, store: Store, resource: str, namespace: str | None) -> None:
        self.store = store
        self.resource = resource
        self.namespace = namespace
        self.queue: queue.Queue[tuple[str, Obj] | None] = queue.Queue()
        self.closed = False

    def _offer(self, etype: str, resource: str, obj: Obj) -> None:
        if self.closed or resource != self.resource:
            return
        if self.namespace and (obj.get("metadata") or {}).get("namespace") != self.namespace:
            return
        self.queue.put((etype, obj))

    def close(self) -> None:
        """Stop receiving events."""
        self.closed = True
        self.store._drop_watcher(self)


class Store:
    """Thread-safe in-memory store of API objects with change notification and watch history.

    See the module docstring for the contract with the kubelet and the controllers."""

    def __init__(self, history_size: int = 5000) -> None:
        self.lock = threading.RLock()
        self._objs: dict[str, dict[tuple[str, str], Obj]] = {r: {} for r in RESOURCES}
        self._by_uid: dict[str, tuple[str, str, str]] = {}
        self._rv = 0
        self._history: deque[tuple[int, str, str, Obj]] = deque(maxlen=history_size)
        # Smallest RV a watch may start from; anything older answers 410.
        self._oldest_rv = 1
        self._subs: list[Subscriber] = []
        self._watchers: list[Watcher] = []
        self._pod_terminator: Callable[[Obj], None] | None = None
        self._foreground_pending: set[str] = set()  # uids waiting for their dependents to go

    # ------------------------------------------------------------------ basics
    @property
    def resource_version(self) -> int:
        """The current (latest) global resourceVersion."""
        with self.lock:
            return self._rv

    @property
    def oldest_resource_version(self) -> int:
        """The oldest resourceVersion a watch can still start from."""
        with self.lock:
            return self._oldest_rv

    def subscribe(self, fn: Subscriber) -> None:
        """Call ``fn(event_type, resource, obj)`` after every change (under the lock: only enqueue)."""
        with self.lock:
            self._subs.append(fn)

    def unsubscribe(self, fn: Subscriber) -> None:
        """Undo :meth:`subscribe`."""
        with self.lock:
            if fn in self._subs:
                self._subs.remove(fn)

    def set_pod_terminator(self, fn: Callable[[Obj], None] | None) -> None:
        """Register the kubelet hook for graceful pod deletion (see module docstring)."""
        with self.lock:
            self._pod_terminator = fn

    def _info(self, resource: str) -> ResourceInfo:
        try:
            return RESOURCES[resource]
        except KeyError:
            raise ApiError(
                404, "NotFound", f"the server could not find the requested resource ({resource})", {}
            ) from None

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def _emit(self, etype: str, resource: str, obj: Obj) -> None:
        rv = int(obj["metadata"]["resourceVersion"])
        shared = copy.deepcopy(obj)
        self._history.append((rv, etype, resource, shared))
        if self._history.maxlen and len(self._history) == self._history.maxlen:
            self._oldest_rv = max(self._oldest_rv, self._history[0][0])
        for w in list(self._watchers):
            w._offer(etype, resource, shared)
        for fn in list(self._subs):
            fn(etype, resource, shared)

    def _ensure_namespace(self, ns: str) -> None:
        if ("", ns) not in self._objs["namespaces"]:
            raise not_found("namespaces", "", ns)

    # ------------------------------------------------------------------ CRUD
    def create(self, resource: str, obj: Obj) -> Obj:
        """Store a new object; fills uid, resourceVersion, creationTimestamp, generation, kind/apiVersion."""
        info = self._info(resource)
        with self.lock:
            obj = copy.deepcopy(obj)
            md = obj.setdefault("metadata", {})
            if not md.get("name") and md.get("generateName"):
                md["name"] = md["generateName"] + _random_suffix()
            name = md.get("name") or ""
            if info.namespaced:
                ns = md.get("namespace") or "default"
                md["namespace"] = ns
                self._ensure_namespace(ns)
                key = (ns, name)
            else:
                md.pop("namespace", None)
                key = ("", name)
                ns = ""
            if key in self._objs[resource]:
                raise already_exists(resource, info.group, name)
            if info.namespaced:
                nsobj = self._objs["namespaces"][("", ns)]
                if nsobj["metadata"].get("deletionTimestamp"):
                    raise ApiError(
                        403,
                        "Forbidden",
                        f'{_qual(info)} "{name}" is forbidden: unable to create new content in '
                        f"namespace {ns} because it is being terminated",
                        {"name": name, "group": info.group, "kind": resource}
                        if info.group
                        else {"name": name, "kind": resource},
                    )
            obj["kind"] = obj.get("kind") or info.kind
            obj["apiVersion"] = obj.get("apiVersion") or info.api_version
            md["uid"] = str(uuid.uuid4())
            md["resourceVersion"] = str(self._next_rv())
            md["creationTimestamp"] = now_rfc3339()
            md.pop("deletionTimestamp", None)
            if info.has_generation:
                md["generation"] = 1
            else:
                md.pop("generation", None)
            if resource == "namespaces":
                obj.setdefault("spec", {"finalizers": ["kubernetes"]})
                obj["status"] = obj.get("status") or {"phase": "Active"}
            elif resource not in ("configmaps", "secrets", "events", "endpoints", "serviceaccounts"):
                obj.setdefault("status", {})
            self._objs[resource][key] = obj
            self._by_uid[md["uid"]] = (resource, key[0], key[1])
            self._emit("ADDED", resource, obj)
            return copy.deepcopy(obj)

    def get(self, resource: str, namespace: str | None, name: str) -> Obj | None:
        """A deep copy of the object, or None."""
        info = self._info(resource)
        with self.lock:
            o = self._objs[resource].get((namespace or "" if info.namespaced else "", name))
            return copy.deepcopy(o) if o is not None else None

    def get_by_uid(self, uid: str) -> tuple[str, Obj] | None:
        """``(resource, object)`` for a uid, or None."""
        with self.lock:
            loc = self._by_uid.get(uid)
            if not loc:
                return None
            o = self._objs[loc[0]].get((loc[1], loc[2]))
            return (loc[0], copy.deepcopy(o)) if o is not None else None

    def list(
        self,
        resource: str,
        namespace: str | None = None,
        label_selector: dict[str, str] | None = None,
        predicate: Callable[[Obj], bool] | None = None,
    ) -> list[Obj]:
        """Deep copies of the matching objects, sorted by (namespace, name)."""
        self._info(resource)
        with self.lock:
            out = []
            for (ns, _name), o in sorted(self._objs[resource].items()):
                if namespace and ns != namespace:
                    continue
                if not labels_match(o["metadata"].get("labels"), label_selector):
                    continue
                if predicate is not None and not predicate(o):
                    continue
                out.append(copy.deepcopy(o))
            return out

    def update(self, resource: str, obj: Obj, *, check_resource_version: bool = False) -> Obj:
        """Replace the whole object (found by namespace/name).

        Keeps uid and creationTimestamp, assigns a new resourceVersion, bumps ``generation`` when
        ``spec`` changed (for kinds with a generation).  A write that changes nothing is a no-op:
        same resourceVersion, no event.  With ``check_resource_version`` a stale
        ``metadata.resourceVersion`` gives 409 Conflict (the API server's optimistic concurrency)."""
        info = self._info(resource)
        with self.lock:
            obj = copy.deepcopy(obj)
            md = obj.setdefault("metadata", {})
            if info.namespaced:
                md["namespace"] = md.get("namespace") or "default"
            key = (md.get("namespace", "") if info.namespaced else "", md.get("name", ""))
            cur = self._objs[resource].get(key)
            if cur is None:
                raise not_found(resource, info.group, key[1])
            cmd = cur["metadata"]
            if (
                check_resource_version
                and md.get("resourceVersion")
                and md["resourceVersion"] != cmd["resourceVersion"]
            ):
                raise conflict_modified(resource, info.group, key[1])
            obj["kind"] = obj.get("kind") or info.kind
            obj["apiVersion"] = obj.get("apiVersion") or info.api_version
            md["uid"] = cmd["uid"]
            md["creationTimestamp"] = cmd["creationTimestamp"]
            if cmd.get("deletionTimestamp"):
                md["deletionTimestamp"] = cmd["deletionTimestamp"]
                if "deletionGracePeriodSeconds" in cmd:
                    md["deletionGracePeriodSeconds"] = cmd["deletionGracePeriodSeconds"]
            if info.has_generation:
                md["generation"] = cmd.get("generation", 1)
            if _strip_volatile(obj) == _strip_volatile(cur):
                return copy.deepcopy(cur)
            if info.has_generation and obj.get("spec") != cur.get("spec"):
                md["generation"] = cmd.get("generation", 1) + 1
            md["resourceVersion"] = str(self._next_rv())
            self._objs[resource][key] = obj
            self._emit("MODIFIED", resource, obj)
            result = copy.deepcopy(obj)
            # Clearing the last finalizer of an object being deleted lets it go.
            if md.get("deletionTimestamp") and not md.get("finalizers") and resource != "pods":
                self._remove(resource, key[0], key[1])
            return result

    def patch_status(self, resource: str, namespace: str | None, name: str, status: Obj) -> Obj:
        """Replace ``.status`` (MODIFIED); a no-op when equal."""
        info = self._info(resource)
        with self.lock:
            key = (namespace or "" if info.namespaced else "", name)
            cur = self._objs[resource].get(key)
            if cur is None:
                raise not_found(resource, info.group, name)
            if cur.get("status") == status:
                return copy.deepcopy(cur)
            new = copy.deepcopy(cur)
            new["status"] = copy.deepcopy(status)
            new["metadata"]["resourceVersion"] = str(self._next_rv())
            self._objs[resource][key] = new
            self._emit("MODIFIED", resource, new)
            return copy.deepcopy(new)

    # ------------------------------------------------------------------ delete + GC
    def delete(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        propagation_policy: str = "Background",
        grace_period_seconds: int | None = None,
    ) -> Obj | None:
        """Delete as a client would (see module docstring); returns the object's last state, or None.

        For pods with a registered terminator and for ``Foreground`` deletion the returned object is
        still present, carrying ``deletionTimestamp``."""
        info = self._info(resource)
        with self.lock:
            key = (namespace or "" if info.namespaced else "", name)
            cur = self._objs[resource].get(key)
            if cur is None:
                return None
            md = cur["metadata"]
            if md.get("deletionTimestamp"):
                return copy.deepcopy(cur)  # already going away
            if resource == "namespaces":
                return self._delete_namespace(name)
            if resource == "pods" and self._pod_terminator is not None:
                grace = grace_period_seconds
                if grace is None:
                    grace = (cur.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
                new = copy.deepcopy(cur)
                new["metadata"]["deletionTimestamp"] = now_rfc3339(grace)
                new["metadata"]["deletionGracePeriodSeconds"] = grace
                new["metadata"]["resourceVersion"] = str(self._next_rv())
                self._objs[resource][key] = new
                self._emit("MODIFIED", resource, new)
                self._pod_terminator(copy.deepcopy(new))
                return copy.deepcopy(new)
            if propagation_policy == "Foreground" and self._dependents(md["uid"]):
                new = copy.deepcopy(cur)
                new["metadata"]["deletionTimestamp"] = now_rfc3339()
                new["metadata"]["deletionGracePeriodSeconds"] = 0
                fins = new["metadata"].setdefault("finalizers", [])
                if "foregroundDeletion" not in fins:
                    fins.append("foregroundDeletion")
                new["metadata"]["resourceVersion"] = str(self._next_rv())
                self._objs[resource][key] = new
                self._foreground_pending.add(md["uid"])
                self._emit("MODIFIED", resource, new)
                for dres, dobj in self._dependents(md["uid"]):
                    dmd = dobj["metadata"]
                    self.delete(dres, dmd.get("namespace"), dmd["name"], "Foreground")
                result = copy.deepcopy(self._objs[resource].get(key) or new)
                self._check_foreground(md["uid"])
                return result
            if md.get("finalizers"):
                # Finalizers hold the object (Terminating) until whoever owns them clears them.
                new = copy.deepcopy(cur)
                new["metadata"]["deletionTimestamp"] = now_rfc3339()
                new["metadata"]["deletionGracePeriodSeconds"] = 0
                new["metadata"]["resourceVersion"] = str(self._next_rv())
                self._objs[resource][key] = new
                self._emit("MODIFIED", resource, new)
                return copy.deepcopy(new)
            if propagation_policy == "Orphan":
                for dres, dobj in self._dependents(md["uid"]):
                    d = copy.deepcopy(dobj)
                    d["metadata"]["ownerReferences"] = [
                        r for r in d["metadata"].get("ownerReferences", []) if r.get("uid") != md["uid"]
                    ]
                    if not d["metadata"]["ownerReferences"]:
                        del d["metadata"]["ownerReferences"]
                    self.update(dres, d)
            return self._remove(resource, key[0], key[1])

    def remove(self, resource: str, namespace: str | None, name: str) -> Obj | None:
        """Really remove an object now (DELETED) — the kubelet's call once a pod's process ended."""
        info = self._info(resource)
        with self.lock:
            return self._remove(resource, namespace or "" if info.namespaced else "", name)

    def _remove(self, resource: str, ns: str, name: str) -> Obj | None:
        cur = self._objs[resource].pop((ns, name), None)
        if cur is None:
            return None
        uid = cur["metadata"]["uid"]
        self._by_uid.pop(uid, None)
        self._foreground_pending.discard(uid)
        final = copy.deepcopy(cur)
        final["metadata"]["resourceVersion"] = str(self._next_rv())
        self._emit("DELETED", resource, final)
        # Background GC of dependents.
        for dres, dobj in self._dependents(uid):
            dmd = dobj["metadata"]
            self.delete(dres, dmd.get("namespace"), dmd["name"])
        for ref in cur["metadata"].get("ownerReferences") or []:
            self._check_foreground(ref.get("uid", ""))
        if ns:
            self._check_namespace_done(ns)
        return copy.deepcopy(final)

    def _dependents(self, uid: str) -> list[tuple[str, Obj]]:
        out = []
        for res, objs in self._objs.items():
            for o in objs.values():
                if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or []):
                    out.append((res, o))
        return out

    def _check_foreground(self, uid: str) -> None:
        if uid not in self._foreground_pending or self._dependents(uid):
            return
        loc = self._by_uid.get(uid)
        if loc is None:
            self._foreground_pending.discard(uid)
            return
        res, ns, name = loc
        cur = self._objs[res][(ns, name)]
        cur = copy.deepcopy(cur)
        fins = [f for f in cur["metadata"].get("finalizers", []) if f != "foregroundDeletion"]
        self._foreground_pending.discard(uid)
        if fins:
            cur["metadata"]["finalizers"] = fins
            self.update(res, cur)
        else:
            self._remove(res, ns, name)

    def _delete_namespace(self, name: str) -> Obj:
        cur = self._objs["namespaces"][("", name)]
        new = copy.deepcopy(cur)
        new["metadata"]["deletionTimestamp"] = now_rfc3339()
        new["status"] = {"phase": "Terminating"}
        new["metadata"]["resourceVersion"] = str(self._next_rv())
        self._objs["namespaces"][("", name)] = new
        self._emit("MODIFIED", "namespaces", new)
        result = copy.deepcopy(new)
        for res, objs in self._objs.items():
            if res == "namespaces":
                continue
            for ns, oname in [k for k in objs if k[0] == name]:
                if (ns, oname) in objs:
                    self.delete(res, ns, oname)
        self._check_namespace_done(name)
        return result

    def _check_namespace_done(self, ns: str) -> None:
        nsobj = self._objs["namespaces"].get(("", ns))
        if nsobj is None or not nsobj["metadata"].get("deletionTimestamp"):
            return
        if any(k[0] == ns for res, objs in self._objs.items() if res != "namespaces" for k in objs):
            return
        self._remove("namespaces", "", ns)

    # ------------------------------------------------------------------ events
    def record_event(
        self, namespace: str, involved: Obj, type_: str, reason: str, message: str, source: str = ""
    ) -> None:
        """Record a v1 Event; a repeat (same object, reason, message) bumps ``count`` (MODIFIED).

        ``involved`` may be a full object or an ``involvedObject`` dict (kind, name, namespace,
        uid, apiVersion)."""
        if "metadata" in involved:
            imd = involved["metadata"]
            inv = {
                "kind": involved.get("kind", ""),
                "namespace": imd.get("namespace", namespace),
                "name": imd.get("name", ""),
                "uid": imd.get("uid", ""),
                "apiVersion": involved.get("apiVersion", ""),
                "resourceVersion": imd.get("resourceVersion", ""),
            }
        else:
            inv = dict(involved)
        with self.lock:
            if ("", namespace) not in self._objs["namespaces"]:
                return
            for o in self._objs["events"].values():
                oi = o["involvedObject"]
                if (
                    o["metadata"]["namespace"] == namespace
                    and oi.get("uid") == inv.get("uid")
                    and oi.get("name") == inv.get("name")
                    and oi.get("kind") == inv.get("kind")
                    and o.get("reason") == reason
                    and o.get("message") == message
                    and o.get("type") == type_
                ):
                    new = copy.deepcopy(o)
                    new["count"] = new.get("count", 1) + 1
                    new["lastTimestamp"] = now_rfc3339()
                    self.update("events", new)
                    return
            ts = now_rfc3339()
            ev = {
                "kind": "Event",
                "apiVersion": "v1",
                "metadata": {
                    "name": f"{inv.get('name', 'x')}.{_secrets.token_hex(8)}",
                    "namespace": namespace,
                },
                "involvedObject": inv,
                "reason": reason,
                "message": message,
                "source": {"component": source} if source else {},
                "firstTimestamp": ts,
                "lastTimestamp": ts,
                "count": 1,
                "type": type_,
                "eventTime": None,
                "reportingComponent": source,
                "reportingInstance": "",
            }
            self.create("events", ev)

    # ------------------------------------------------------------------ watch support
    def compact(self, rv: int | None = None) -> None:
        """Forget history up to ``rv`` (default: everything up to now): older watches answer 410."""
        with self.lock:
            target = self._rv if rv is None else rv
            while self._history and self._history[0][0] <= target:
                self._history.popleft()
            self._oldest_rv = max(self._oldest_rv, target + 1 if rv is None else target)

    def watch(
        self, resource: str, namespace: str | None = None, resource_version: str | None = None
    ) -> tuple[Watcher, list[tuple[str, Obj]]]:
        """Open a watcher; returns it with the backlog to send first.

        ``resource_version`` None/"" /"0": synthetic ADDED for every current object; otherwise the
        history after that RV (410 ``ApiError`` if it is older than the window)."""
        self._info(resource)
        with self.lock:
            w = Watcher(self, resource, namespace)
            backlog: list[tuple[str, Obj]] = []
            if not resource_version or resource_version == "0":
                backlog = [("ADDED", o) for o in self.list(resource, namespace)]
            else:
                try:
                    since = int(resource_version)
                except ValueError:
                    raise ApiError(
                        400, "BadRequest", f'invalid resource version "{resource_version}"'
                    ) from None
                if since < self._oldest_rv - 1 or (
                    since < self._rv and self._history and since < self._history[0][0] - 1
                ):
                    raise gone(f"too old resource version: {since} ({self._oldest_rv})")
                for rv, et, res, o in self._history:
                    if (
                        rv > since
                        and res == resource
                        and (not namespace or o["metadata"].get("namespace") == namespace)
                    ):
                        backlog.append((et, copy.deepcopy(o)))
            self._watchers.append(w)
            return w, backlog

    def _drop_watcher(self, w: Watcher) -> None:
        with self.lock:
            if w in self._watchers:
                self._watchers.remove(w)

    def close_watchers(self) -> None:
        """Wake every watcher with ``None`` (server shutdown)."""
        with self.lock:
            for w in self._watchers:
                w.queue.put(None)
            self._watchers.clear()

    def all_objects(self) -> Iterable[tuple[str, Obj]]:
        """Every stored object as ``(resource, deep copy)`` (debugging aid)."""
        with self.lock:
            return [(r, copy.deepcopy(o)) for r, objs in self._objs.items() for o in objs.values()]


def _qual(info: ResourceInfo) -> str:
    return f"{info.plural}.{info.group}" if info.group else info.plural


def _random_suffix(n: int = 5) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    return "".join(_secrets.choice(alphabet) for _ in range(n))
