"""Watches, not polling: one list+watch per kind per namespace, shared by every service in it.

:class:`KindWatch` keeps an up-to-date copy of one kind's objects (Deployments, pods, Events) in a
namespace: it lists once, then watches from the list's resourceVersion with bookmarks on, resumes
from the last resourceVersion it saw when a watch ends or the connection drops, and lists again
when the server answers 410 Gone. :class:`NamespaceWatch` holds the three kinds of one namespace,
recomputes the status of the services an event touches and delivers it to their subscribers.
:class:`PodLogFollower` follows one pod's log across container restarts with timestamps, reopening
from shortly before the last line it delivered and skipping what it already delivered, so nothing
is lost or repeated. Told the container's state by the pod watch, it opens a stream only once the
container has started and reopens only for a new container instance or a dropped stream: one log
request per container start (``kubectl logs -f`` makes one per pod).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import math
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from ..batch.requeue import restart_marker
from ..core.errors import ApiError, TiersError
from ..core.model import PodLogLine, ServiceState, ServiceStatus
from ..core.reachability import STALE_AFTER_S, backoff_delay, is_stale, last_seen, reconnecting
from .client import KubeClient

log = logging.getLogger(__name__)

MANAGED = "app.kubernetes.io/managed-by=jupyter-tiers"
NAME_LABEL = "app.kubernetes.io/name"

Listener = Callable[[str, str, dict[str, Any]], None]  # (kind, event type, object)

# A reopened log stream reaches this far before the last delivered line (clock skew between this
# machine and the node); lines already delivered are skipped by their timestamps.
SINCE_MARGIN_S = 60
SINCE_MAX_S = 10 * 365 * 86400  # "from the start" when the last timestamp cannot be read


def split_chunks(chunks: Iterable[bytes]) -> Iterator[str]:
    """Complete lines (without their newline) of a byte stream cut into arbitrary chunks.

    Bytes after a chunk's last newline are held as a list and joined once, when their line
    ends, and each block of whole lines is decoded and split in one call, so the cost is linear
    in the bytes (a single line of many megabytes, or a chunk of many short lines). Same text as
    decoding line by line: a newline byte is never part of a UTF-8 sequence, valid or not. A last
    line without a newline is yielded when the stream ends.
    """
    pending: list[bytes] = []
    for chunk in chunks:
        cut = chunk.rfind(b"\n") + 1
        if not cut:
            if chunk:
                pending.append(chunk)
            continue
        if pending:
            pending.append(chunk[:cut])
            block = b"".join(pending)
            pending.clear()
        else:
            block = chunk[:cut] if cut < len(chunk) else chunk
        if cut < len(chunk):
            pending.append(chunk[cut:])
        texts = block.decode("utf-8", errors="replace").split("\n")
        texts.pop()  # the empty string after the block's last newline
        yield from texts
    if pending:
        yield b"".join(pending).decode("utf-8", errors="replace")


def _lines(resp: Any) -> Iterator[str]:
    """Complete lines of a streamed HTTP body (a watch or a log), as they arrive."""
    return split_chunks(resp.stream(amt=None, decode_content=False))


def _close_quietly(resp: Any) -> None:
    """Close a streaming response from another thread (it unblocks the reader).

    The socket is shut down for reading first: closing alone waits for the reader thread's
    buffered read to return, which on a quiet watch or log stream can take minutes."""
    if resp is not None:
        with contextlib.suppress(Exception):  # urllib3 >= 2.3; the connection may be released
            resp.shutdown()
        with contextlib.suppress(Exception):  # a dead socket may fail to close; we leave anyway
            resp.close()


class KindWatch:
    """An always-current copy of one kind's objects in one namespace (see the module doc)."""

    def __init__(self, client: KubeClient, kind: str, namespace: str, on_event: Listener, *,
                 label_selector: str | None = None, watch_timeout: int = 290,
                 max_backoff: float = 30.0, list_first: bool = True, jitter: float = 0.2) -> None:
        self.client = client
        self.kind = kind
        # Without list_first the kind is synced by one watch from resourceVersion 0, which the
        # server opens with a synthetic ADDED per existing object (one request instead of two).
        # Its end is not marked, and objects deleted while it was down are never reported
        # DELETED: fine for Events, which only add detail and age out.
        self.list_first = list_first
        self.namespace = namespace
        self.label_selector = label_selector
        self.on_event = on_event
        self.watch_timeout = watch_timeout
        self.max_backoff = max_backoff
        self.jitter = jitter
        self.failures = 0  # attempts failed in a row
        self.last_ok: float | None = None  # monotonic time the API last answered
        self.down_since: float | None = None  # the last answer before the current outage
        self._rng = random.Random()
        self.objects: dict[str, dict[str, Any]] = {}
        self.resource_version: str | None = None
        self.synced = threading.Event()
        self.attempted = threading.Event()  # the first list has succeeded or failed
        self.error: str | None = None  # the last problem, until the next success
        self.lists = 0
        self.watches = 0
        self.relists_after_gone = 0
        self._stop = threading.Event()
        self._resp: Any = None
        self._thread = threading.Thread(target=self._run, name=f"jt-k8s-{kind}-{namespace}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        _close_quietly(self._resp)

    def _list_fn(self) -> Callable[..., Any]:
        if self.kind == "deployments":
            return self.client.apps().list_namespaced_deployment
        if self.kind == "pods":
            return self.client.core().list_namespaced_pod
        if self.kind == "ingresses":
            return self.client.networking().list_namespaced_ingress
        return self.client.core().list_namespaced_event

    def _selector(self) -> dict[str, Any]:
        return {"label_selector": self.label_selector} if self.label_selector else {}

    def _list(self) -> None:
        resp = self.client.call(self._list_fn(), self.namespace, _preload_content=False, verb="list",
                                resource=self.kind, namespace=self.namespace, **self._selector())
        self.lists += 1
        data = json.loads(resp.data)
        fresh = {o["metadata"]["name"]: o for o in data.get("items") or []}
        gone = set(self.objects) - set(fresh)
        old = self.objects
        self.objects = fresh
        self.resource_version = data.get("metadata", {}).get("resourceVersion")
        # After a relist, tell listeners what changed while we were not watching.
        for name in gone:
            self.on_event(self.kind, "DELETED", old[name])
        for name, obj in fresh.items():
            if old.get(name) != obj:
                self.on_event(self.kind, "ADDED" if name not in old else "MODIFIED", obj)
        self.synced.set()
        self.attempted.set()

    def _watch_once(self) -> bool:
        """One watch request; returns False when the server said 410 Gone (list again)."""
        self.watches += 1
        resp = self.client.call(
            self._list_fn(), self.namespace, watch=True, resource_version=self.resource_version or "0",
            allow_watch_bookmarks=True, timeout_seconds=self.watch_timeout, _preload_content=False,
            _request_timeout=(self.client.request_timeout, self.watch_timeout + 30),
            verb="watch", resource=self.kind, namespace=self.namespace, **self._selector())
        self._resp = resp
        if self._stop.is_set():  # stopped while this request was opening: stop() missed it
            _close_quietly(resp)
        self._recovered()
        if not self.synced.is_set():  # a watch from 0 (list_first False): its ADDED events follow
            self.synced.set()
            self.attempted.set()
        try:
            for line in _lines(resp):
                if self._stop.is_set():
                    return True
                if not line.strip():
                    continue
                event = json.loads(line)
                etype, obj = event.get("type"), event.get("object") or {}
                if etype == "ERROR":
                    if obj.get("code") == 410:
                        return False
                    raise ApiError(f"watch of {self.kind} in {self.namespace}: "
                                   f"{obj.get('message') or obj}", int(obj.get("code") or 0))
                rv = (obj.get("metadata") or {}).get("resourceVersion")
                if rv:
                    self.resource_version = rv
                if etype == "BOOKMARK":
                    continue
                name = obj["metadata"]["name"]
                if etype == "DELETED":
                    self.objects.pop(name, None)
                else:
                    self.objects[name] = obj
                self.error = None
                self.on_event(self.kind, str(etype), obj)
        finally:
            self._resp = None
            resp.release_conn()
        return True

    def _run(self) -> None:
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list and not self.list_first:
                    self.resource_version = None  # watch from 0: every object again, as ADDED
                    need_list = False
                elif need_list:
                    self._list()
                    need_list = False
                    self._recovered()
                if not self._watch_once():
                    self.relists_after_gone += 1
                    need_list = True
                    continue
                self.failures = 0  # a watch that ended cleanly: the next drop starts over
            except TiersError as exc:
                problem = str(exc)
                # A 410 from the list/watch request itself (not an ERROR event) means the same.
                need_list = need_list or (isinstance(exc, ApiError) and exc.status == 410)
            except Exception as exc:  # a dropped stream (urllib3 ProtocolError, ...): resume
                if self._stop.is_set():
                    return
                problem = f"watch of {self.kind} dropped: {type(exc).__name__}"
            else:
                continue
            # Back off with jitter, capped (many watches cut at once do not return in step).
            self.failures += 1
            delay = backoff_delay(self.failures, base=0.5, cap=self.max_backoff, jitter=self.jitter,
                                  uniform=self._rng.random)
            self._failed(f"{problem} — {reconnecting(self.failures, delay)}")
            if self._stop.wait(delay):
                return

    def _recovered(self) -> None:
        """The API answers again: clear the problem and let every service drop its banner."""
        self.last_ok, self.down_since = time.monotonic(), None
        if self.error is not None:
            self.error = None
            self.on_event(self.kind, "SYNCED", {})

    def _failed(self, message: str) -> None:
        log.debug("k8s watch %s/%s: %s", self.namespace, self.kind, message)
        if self.down_since is None:
            self.down_since = self.last_ok if self.last_ok is not None else time.monotonic()
        self.error = message
        self.attempted.set()
        self.on_event(self.kind, "ERROR", {})


StatusFn = Callable[["NamespaceWatch"], ServiceStatus]


class NamespaceWatch:
    """Deployments, pods and Events of one namespace, shared by every service followed in it;
    Ingresses too once a service routed through one is followed (:meth:`watch_ingresses`)."""

    KINDS = ("deployments", "pods", "events")

    def __init__(self, client: KubeClient, namespace: str, *, stale_after: float = STALE_AFTER_S) -> None:
        self.client = client
        self.namespace = namespace
        self.stale_after = stale_after  # reachability.py: a state older than this shows UNKNOWN
        self._lock = threading.RLock()
        # Held while a status is computed and handed to its subscriber, so the three watch
        # threads deliver in the order they computed (an older status delivered last would stay
        # on show until the next event).
        self._deliver_lock = threading.RLock()
        self._subs: dict[int, tuple[str, StatusFn, Callable[[ServiceStatus], None]]] = {}
        self._last: dict[int, ServiceStatus] = {}
        self._listeners: dict[int, Listener] = {}
        self._ids = itertools.count(1)
        self._started = False
        selectors = {"deployments": MANAGED, "pods": MANAGED, "events": None}
        # Deployments and pods are listed first (a service's state needs all of them known);
        # Events only add detail, so one watch from 0 syncs them (see KindWatch.list_first).
        self.kinds = {k: KindWatch(client, k, namespace, self._on_event, label_selector=selectors[k],
                                   list_first=k != "events")
                      for k in self.KINDS}

    # --- what the tier reads -------------------------------------------------------------
    def ensure_started(self, timeout: float = 30.0) -> None:
        """Start the watches and wait (at most ``timeout`` in all) until each kind has listed or
        failed to: an unreachable API is reported at once, not after a timeout per kind."""
        with self._lock:
            if not self._started:
                self._started = True
                for kw in list(self.kinds.values()):
                    kw.start()
        deadline = time.monotonic() + timeout
        for kw in list(self.kinds.values()):
            kw.attempted.wait(max(0.0, deadline - time.monotonic()))

    def watch_ingresses(self, timeout: float = 30.0) -> None:
        """Add the Ingresses of the namespace (ours only) to what is watched, once: only a
        namespace with a service routed through an Ingress pays for the list and the watch."""
        with self._lock:
            kw = self.kinds.get("ingresses")
            if kw is None:
                kw = KindWatch(self.client, "ingresses", self.namespace, self._on_event,
                               label_selector=MANAGED)
                self.kinds = {**self.kinds, "ingresses": kw}
                if self._started:
                    kw.start()
        if self._started:
            kw.attempted.wait(timeout)

    def ingresses(self, service: str) -> list[dict[str, Any]]:
        kw = self.kinds.get("ingresses")
        return [] if kw is None else [o for o in list(kw.objects.values())
                                      if (o["metadata"].get("labels") or {}).get(NAME_LABEL) == service]

    def deployments(self, service: str) -> list[dict[str, Any]]:
        return [o for o in list(self.kinds["deployments"].objects.values())
                if (o["metadata"].get("labels") or {}).get(NAME_LABEL) == service]

    def pods(self, service: str) -> list[dict[str, Any]]:
        return [o for o in list(self.kinds["pods"].objects.values())
                if (o["metadata"].get("labels") or {}).get(NAME_LABEL) == service]

    def events(self) -> list[dict[str, Any]]:
        return list(self.kinds["events"].objects.values())

    @property
    def problem(self) -> str | None:
        errors = [kw.error for kw in list(self.kinds.values()) if kw.error]
        return errors[0] if errors else None

    @property
    def requests(self) -> int:
        return sum(kw.lists + kw.watches for kw in list(self.kinds.values()))

    # --- subscriptions -------------------------------------------------------------------
    def subscribe(self, service: str, compute: StatusFn,
                  on_status: Callable[[ServiceStatus], None]) -> int:
        """Call ``on_status`` with the service's status now and whenever an event changes it."""
        self.ensure_started()
        with self._lock:
            token = next(self._ids)
            self._subs[token] = (service, compute, on_status)
        self._deliver(token)
        return token

    def add_listener(self, fn: Listener) -> int:
        with self._lock:
            token = next(self._ids)
            self._listeners[token] = fn
        return token

    def unsubscribe(self, token: int) -> None:
        with self._lock:
            self._subs.pop(token, None)
            self._last.pop(token, None)
            self._listeners.pop(token, None)

    def stop(self) -> None:
        for kw in list(self.kinds.values()):
            kw.stop()

    def _on_event(self, kind: str, etype: str, obj: dict[str, Any]) -> None:
        with self._lock:
            listeners = list(self._listeners.values())
            subs = list(self._subs.items())
        for fn in listeners:
            _safe(fn, kind, etype, obj)
        for token, (service, _, _) in subs:
            if etype in ("ERROR", "SYNCED"):
                hit = True  # the connection's state changed: every service's banner may change
            elif kind == "events":
                hit = _event_mentions(obj, service)
            else:
                hit = _service_of(obj) == service
            if hit:
                self._deliver(token)

    def _deliver(self, token: int) -> None:
        with self._deliver_lock:
            with self._lock:
                entry = self._subs.get(token)
                if entry is None:
                    return
                _, compute, on_status = entry
                try:
                    status = compute(self)
                except Exception:
                    log.exception("computing a service status failed")
                    return
                problem = self.problem
                if not all(self.kinds[k].synced.is_set() for k in ("deployments", "pods")):
                    # Nothing seen yet: no Deployment means "not known", not "deleted" (which
                    # ends every view of the service). Events only add detail.
                    status = replace(status, state=ServiceState.UNKNOWN, api_reachable=problem is None,
                                     message=f"{problem} — retrying" if problem else status.message)
                elif problem:
                    status = replace(status, api_reachable=False,
                                     message=f"{problem}; the state is as last seen")
                    status = self._stale(status)
                if self._last.get(token) == status:
                    return
                self._last[token] = status
            _safe(on_status, status)


    def _stale(self, status: ServiceStatus) -> ServiceStatus:
        """UNKNOWN (the last seen state and when) once the API has not answered for longer than
        ``stale_after``: never a confident READY from a copy that old."""
        downs = [kw.down_since for kw in self.kinds.values() if kw.error and kw.down_since is not None]
        now = time.monotonic()
        since = min(downs) if downs else None
        if status.state.terminal or not is_stale(since, now, self.stale_after):
            return status
        assert since is not None
        wall = time.time()
        return replace(status, state=ServiceState.UNKNOWN,
                       reason=last_seen(status.state.value, wall - (now - since), wall))


def _service_of(obj: dict[str, Any]) -> str:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return str(labels.get(NAME_LABEL) or "")


def _event_mentions(event: dict[str, Any], service: str) -> bool:
    name = str((event.get("involvedObject") or {}).get("name") or "")
    return name == service or name.startswith(service + "-")


def _safe(fn: Callable[..., Any], *args: Any) -> None:
    try:
        fn(*args)
    except Exception:  # a broken listener must not stop the watch
        log.exception("jupyter-tiers k8s listener failed")


# --- pod logs ------------------------------------------------------------------------------------

Instance = tuple[str, int, bool]  # a container instance: (containerID, restartCount, running)
_UNKNOWN: Any = object()
# A stream that ended while the pod watch still says its container runs is taken for dropped
# (and reopened) after this long: the watch reports an exit a moment after the stream ends.
RECHECK_S = 5.0


def container_instance(pod: dict[str, Any], container: str | None = None) -> Instance | None:
    """The pod's container ``container`` (default: the first) as the pod watch sees it:
    ``(containerID, restartCount, running)``; None until it has been created (no containerID:
    still ContainerCreating, so there is no log to read yet)."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    statuses = [c for c in statuses if isinstance(c, dict)]
    chosen = next((c for c in statuses if c.get("name") == container), None) if container else None
    if chosen is None:
        chosen = statuses[0] if statuses and container is None else None
    if chosen is None or not chosen.get("containerID"):
        return None
    restarts = chosen.get("restartCount")
    running = isinstance((chosen.get("state") or {}).get("running"), dict)
    return str(chosen["containerID"]), restarts if isinstance(restarts, int) else 0, running


def split_timestamp(line: str) -> tuple[str, str]:
    """``"2026-12-02T17:06:12.452000816Z text"`` -> (timestamp, text)."""
    ts, sep, text = line.partition(" ")
    if sep and ts[:4].isdigit() and ts.endswith("Z"):
        return ts, text
    return "", line


def since_seconds(ts: str, now: float) -> int:
    """``sinceSeconds`` that reaches back to the RFC 3339 timestamp ``ts`` from ``now``, with
    SINCE_MARGIN_S to spare for clock skew between this machine and the node."""
    try:
        then = datetime.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return SINCE_MAX_S
    return max(1, min(SINCE_MAX_S, math.ceil(now - then) + SINCE_MARGIN_S))


def timestamp_key(ts: str) -> tuple[str, int]:
    """Sortable key of an RFC 3339 timestamp with 0-9 fraction digits: (seconds part, nanos)."""
    head, _, frac = ts.rstrip("Z").partition(".")
    return head, int((frac + "000000000")[:9]) if frac.isdigit() else 0


class PodLogFollower:
    """Follows one pod's log (one container) across restarts until stopped or the pod is gone.

    Each stream is opened with ``timestamps=true`` and, after the first, with ``sinceSeconds``
    reaching a little before the last delivered line (the client has no ``sinceTime``); lines
    at or before the last delivered timestamp are skipped (counting lines that share that exact
    timestamp), so a reopened stream, or the previous instance's log that a follow returns
    during CrashLoopBackOff, repeats nothing.

    Once :meth:`update` has told it the container's state (the pod watch's), it opens a stream
    only when the container has been created, and after a stream ends with its container it
    waits for the next instance (a restart) instead of reopening; an error or a stream that ended
    while the container still runs (after RECHECK_S) is reopened with back-off. Without
    :meth:`update` it opens at once and reopens whenever a stream ends.
    """

    def __init__(self, client: KubeClient, namespace: str, pod: str,
                 on_lines: Callable[[list[PodLogLine]], None], *, since: str | None = None,
                 tail: int | None = None, max_backoff: float = 5.0, idle_timeout: float = 300.0,
                 container: str | None = None, recheck: float = RECHECK_S) -> None:
        self.client = client
        self.namespace = namespace
        self.pod = pod
        self.container = container
        self.recheck = recheck
        self.on_lines = on_lines
        self.last_ts = since or ""
        self.same_ts_count = 0
        self.tail = tail
        self.max_backoff = max_backoff
        # A quiet server may print nothing for long; after this the stream is reopened from the
        # last timestamp, which loses nothing.
        self.idle_timeout = idle_timeout
        self.streams = 0
        self.restart: int | None = None  # the container restart whose lines were delivered last
        self._instance: Instance | None = _UNKNOWN
        self._draining = False
        self._skip_same = 0
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._resp: Any = None
        self._thread = threading.Thread(target=self._run, name=f"jt-podlog-{pod}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def kick(self) -> None:
        """The pod changed (a container started): reopen soon."""
        self._wake.set()

    def update(self, instance: Instance | None) -> None:
        """The pod watch's view of the container (see :func:`container_instance`)."""
        self._instance = instance
        self._wake.set()

    def drain(self) -> None:
        """The pod is gone: finish the stream that is open (its last lines), open no other."""
        self._draining = True
        self._wake.set()

    def _idle(self, timeout: float | None) -> None:
        self._wake.wait(timeout)
        self._wake.clear()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        _close_quietly(self._resp)

    def _accept(self, ts: str) -> bool:
        if not self.last_ts or not ts:
            return True
        key, last = timestamp_key(ts), timestamp_key(self.last_ts)
        if key > last:
            # Past the last delivered stamp: what is left of the skip (lines a reopened stream
            # repeats) cannot apply any more, e.g. a restarted container's log never repeats them.
            self._skip_same = 0
            return True
        if key == last and self._skip_same > 0:
            self._skip_same -= 1
            return False
        return key == last

    def _open(self) -> Any:
        kwargs: dict[str, Any] = {"follow": True, "timestamps": True, "_preload_content": False}
        if self.container:
            kwargs["container"] = self.container
        if self.last_ts:
            # The client has no sinceTime (only sinceSeconds): go back from now to a little
            # before the last delivered line; _accept drops what was already delivered.
            kwargs["since_seconds"] = since_seconds(self.last_ts, time.time())
        elif self.tail is not None:
            kwargs["tail_lines"] = self.tail
        return self.client.call(
            self.client.core().read_namespaced_pod_log, self.pod, self.namespace,
            _request_timeout=(self.client.request_timeout, self.idle_timeout),
            verb="get", resource="pods/log", namespace=self.namespace, **kwargs)

    def _ready(self, ended: tuple[str, int] | None, ended_at: float) -> tuple[str, int] | bool:
        """Whether to open a stream now: the instance to open it for (or True, no pod state
        known); False after waiting a little for the pod watch to say more."""
        instance = self._instance
        if instance is _UNKNOWN:
            return True
        if instance is None:  # not created yet: the watch says when it is
            self._idle(60.0)
            return False
        cid, restarts, running = instance
        if (cid, restarts) == ended:
            if not running:  # that instance is over: wait for the next one
                self._idle(60.0)
                return False
            left = self.recheck - (time.monotonic() - ended_at)
            if left > 0:  # most likely the watch has not yet reported the exit
                self._idle(left)
                return False
        return cid, restarts

    def _run(self) -> None:
        backoff = 0.5
        ended: tuple[str, int] | None = None  # the instance whose stream ended with it
        ended_at = 0.0
        while not self._stop.is_set():
            if self._draining:
                return
            opening = self._ready(ended, ended_at)
            if opening is False:
                continue
            delivered = False
            try:
                resp = self._open()
                self.streams += 1
                self._resp = resp
                if self._stop.is_set():  # stopped while the stream was opening: stop() missed it
                    _close_quietly(resp)
                self._skip_same = self.same_ts_count
                restart = opening[1] if isinstance(opening, tuple) else None
                try:
                    for raw in _lines(resp):
                        ts, text = split_timestamp(raw.rstrip("\r"))
                        if not self._accept(ts):
                            continue
                        if ts and ts == self.last_ts:
                            self.same_ts_count += 1
                        elif ts:
                            self.last_ts, self.same_ts_count = ts, 1
                        # One line at a time: the stream blocks between writes, and the widget's
                        # batcher coalesces a fast log. A new container restart's first line comes
                        # after a marker, as the Slurm view marks a requeue.
                        line = PodLogLine(text, self.pod, ts, restart)
                        if restart is not None and restart > 0 and restart != self.restart:
                            self.on_lines([PodLogLine(restart_marker(restart), self.pod, ts, restart), line])
                        else:
                            self.on_lines([line])
                        if restart is not None:
                            self.restart = restart
                        delivered = True
                finally:
                    self._resp = None
                    resp.release_conn()
                if isinstance(opening, tuple) and not self._stop.is_set():
                    # The stream ended with its container: read the next instance when it starts.
                    ended, ended_at, backoff = opening, time.monotonic(), 0.5
                    continue
            except ApiError as exc:
                if exc.status == 404:
                    return  # the pod is gone
                log.debug("log of %s: %s", self.pod, exc)
            except Exception as exc:  # a dropped stream: reopen from the last timestamp
                if self._stop.is_set():
                    return
                log.debug("log of %s dropped: %r", self.pod, exc)
            backoff = 0.5 if delivered else min(self.max_backoff, backoff * 2)
            self._idle(backoff)
