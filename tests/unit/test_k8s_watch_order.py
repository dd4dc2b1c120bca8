"""NamespaceWatch hands a subscriber its statuses in the order it computed them.

Deployments, pods and Events are watched by three threads. Each computed the service's status
under the watch's lock but called ``on_status`` after releasing it, so a status computed from an
older view (the Deployment already counting 2 ready while the pod cache still had one pod not
ready) could arrive after a newer one; with no event after it, the ServeView kept showing
``READY 2/2`` above a pod row marked not ready for good (seen in tests/browser/test_serve_widget).
"""

from __future__ import annotations

import threading
from typing import Any

from jupyter_tiers.core.model import ServiceState, ServiceStatus
from jupyter_tiers.k8s.watch import NAME_LABEL, NamespaceWatch


def test_a_status_computed_later_is_delivered_later() -> None:
    nsw = NamespaceWatch(client=None, namespace="demo")  # type: ignore[arg-type]
    nsw._started = True  # no watch threads: the test plays their events
    for kw in nsw.kinds.values():
        kw.synced.set()
        kw.attempted.set()  # else subscribe() waits out ensure_started's 30 s bound for a first list

    computed = 0
    first_computed = threading.Event()
    delivered: list[str] = []
    newer_delivered = threading.Event()

    def compute(_nsw: NamespaceWatch) -> ServiceStatus:
        nonlocal computed
        computed += 1
        if computed == 2:
            first_computed.set()
        return ServiceStatus("web", ServiceState.READY, reason=f"view {computed}")

    def on_status(status: ServiceStatus) -> None:
        if status.reason == "view 2":
            # The deployments thread is slow to hand over its status: the pods thread computes a
            # newer one meanwhile. (Bounded: with the fix the pods thread waits for this call.)
            newer_delivered.wait(1)
        delivered.append(str(status.reason))  # what the subscriber shows from now on
        if status.reason == "view 3":
            newer_delivered.set()

    nsw.subscribe("web", compute, on_status)
    assert delivered == ["view 1"]
    obj: dict[str, Any] = {"metadata": {"name": "web", "labels": {NAME_LABEL: "web"}}}
    deployments = threading.Thread(target=nsw._on_event, args=("deployments", "MODIFIED", obj))
    deployments.start()
    assert first_computed.wait(10)
    pods = threading.Thread(target=nsw._on_event, args=("pods", "MODIFIED", obj))
    pods.start()
    deployments.join(10)
    pods.join(10)
    assert delivered == ["view 1", "view 2", "view 3"]
