"""Following one Kubernetes service: its listeners (a subscription each, on the namespace's
shared watch), its pods' log followers, and the guard against a watch cache that lags behind a
create just made."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from ..config.registry import JobRecord
from ..core.errors import TiersError
from ..core.model import PodLogLine, ServiceState, ServiceStatus
from ..engine.subscription import Subscription
from .client import KubeClient
from .render import CONTAINER_NAME
from .watch import NamespaceWatch, PodLogFollower, container_instance


class LaggingWatchGuard:
    """Passes a service's (or one Deployment's) statuses from the namespace's shared watch on to
    ``deliver``, except a DELETED that comes before the watch has shown the object once.

    The watch's cache may lag behind a create made a moment ago (the apply before a view opens,
    a blue-green switch's new colour) and then reports the object DELETED. Such a DELETED goes
    on only when ``confirm_gone``, a direct read run on a thread, returns the status to deliver;
    it returns None when the object is there (the watch's next status decides) and raises
    TiersError when it cannot tell (asked again every ``retry_s`` until the watch shows the
    object or the guard is cancelled). Statuses are delivered one at a time, in order."""

    def __init__(self, deliver: Callable[[ServiceStatus], None],
                 confirm_gone: Callable[[], ServiceStatus | None], *, name: str = "service",
                 retry_s: float = 5.0,
                 start: Callable[[Callable[[], None]], None] | None = None) -> None:
        self.deliver = deliver
        self.confirm_gone = confirm_gone
        self.name = name
        self.retry_s = retry_s
        self._start = start or self._on_thread
        self._order = threading.RLock()
        self._cancelled = threading.Event()
        self.shown = False  # a status was delivered: a later DELETED is the watch's own word
        self._checking = False

    def __call__(self, status: ServiceStatus) -> None:
        with self._order:
            if status.state is ServiceState.DELETED and not self.shown:
                if not self._checking:
                    self._checking = True
                    self._start(self._check)
                return
            self.shown = True
            self.deliver(status)

    def cancel(self) -> None:
        """Stop asking (the listener has gone)."""
        self._cancelled.set()

    def _on_thread(self, fn: Callable[[], None]) -> None:
        threading.Thread(target=fn, name=f"jt-gone-{self.name}", daemon=True).start()

    def _check(self) -> None:
        while True:
            try:
                gone = self.confirm_gone()
            except TiersError:
                if not self.shown and not self._cancelled.wait(self.retry_s):
                    continue  # cannot tell now: ask again, unless the watch has shown it meanwhile
                gone = None
            with self._order:
                self._checking = False
                if gone is not None and not self.shown and not self._cancelled.is_set():
                    self.shown = True
                    self.deliver(gone)
            return


class ServiceSubscription(Subscription[ServiceStatus]):
    """One listener on one service: its token on the namespace watch, and its pods' log
    followers when it wants lines."""

    def __init__(self, record: JobRecord, nsw: NamespaceWatch,
                 on_status: Callable[[ServiceStatus], None] | None,
                 forget: Callable[[ServiceSubscription], None]) -> None:
        super().__init__(record, on_status)
        self.forget = forget  # the tier's: drops this listener's watch token and log followers
        self.nsw = nsw
        self.token: int | None = None
        self.listener: int | None = None
        self.logs: ServiceLogs | None = None
        self.recorded = ""
        self.guard: LaggingWatchGuard | None = None

    def _detach(self) -> None:
        self.forget(self)


class ServiceLogs:
    """One PodLogFollower per pod of a service: started when a pod appears, drained when it
    goes. Each follower is told the server container's state by the pod watch, so it opens a
    stream only once the container has started and reopens only after a restart (or a dropped
    stream): one log request per container start."""

    def __init__(self, client: KubeClient, namespace: str, service: str,
                 on_lines: Callable[[list[PodLogLine]], None]) -> None:
        self.client = client
        self.namespace = namespace
        self.service = service
        self.on_lines = on_lines
        self.followers: dict[str, PodLogFollower] = {}
        self._draining: list[PodLogFollower] = []
        self._lock = threading.Lock()
        self._stopped = False

    def sync(self, pods: Sequence[dict[str, Any]]) -> None:
        for pod in pods:
            self.on_event("pods", "ADDED", pod)

    def on_event(self, kind: str, etype: str, obj: dict[str, Any]) -> None:
        if kind != "pods" or not obj:
            return
        meta = obj.get("metadata") or {}
        if (meta.get("labels") or {}).get("app.kubernetes.io/name") != self.service:
            return
        name = meta["name"]
        with self._lock:
            if self._stopped:
                return
            follower = self.followers.get(name)
            if etype == "DELETED":
                if follower is not None:
                    # Let it drain: the stream ends by itself once the container has stopped.
                    self.followers.pop(name)
                    follower.drain()
                    self._draining = [f for f in self._draining if f.alive] + [follower]
                return
            instance = container_instance(obj, CONTAINER_NAME)
            if follower is None:
                follower = PodLogFollower(self.client, self.namespace, name, self.on_lines,
                                          container=CONTAINER_NAME)
                follower.update(instance)
                self.followers[name] = follower
                follower.start()
            else:
                follower.update(instance)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            followers = list(self.followers.values()) + self._draining
            self.followers.clear()
            self._draining = []
        for follower in followers:
            follower.stop()
