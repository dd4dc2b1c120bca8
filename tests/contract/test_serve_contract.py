"""The ServeTier contract (jupyter_tiers/engine/tier.py), written once and run on every serving backend
(conftest.py: ``kubernetes`` on the emulator, ``local`` with real supervisors and replicas).

Each test states one promise of a public verb, as the docstrings of ServeTier and Service give
it: deploy (``apply``) reaches READY and is idempotent, status, logs, watch, scale, restart,
delete (twice), promote and rollback with the errors users see. One service per backend is
shared by the module (each test leaves it READY with one replica); delete has its own. Where a
backend declares it cannot (CAPABILITIES), the test asserts the declared refusal instead."""

from __future__ import annotations

import re
import threading
import time

import pytest

from jupyter_tiers.core.errors import JobNotFound, SpecError, TiersError, Unsupported
from jupyter_tiers.core.model import PodLogLine, ServiceState, ServiceStatus
from jupyter_tiers.engine.handles import Service
from tests.contract.conftest import GUARD, ServeBackend
from tests.helpers import wait_for

# Prints one line, then answers GET / with its replica's name (HOSTNAME on Kubernetes, JT_REPLICA
# locally); PORT is set on both.
SERVER = """\
import http.server, os
NAME = os.environ.get("JT_REPLICA") or os.environ.get("HOSTNAME", "?")
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("hello from " + NAME).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
print("serving on", os.environ["PORT"], flush=True)
http.server.ThreadingHTTPServer(("0.0.0.0", int(os.environ["PORT"])), H).serve_forever()
"""

CRASHES = "import sys\nprint('about to fail', flush=True)\nsys.exit(3)\n"


def ready(svc: Service, replicas: int = 1) -> ServiceStatus:
    """Wait (bounded) until ``svc`` is READY with ``replicas`` ready replicas and no other pod."""
    deadline = time.monotonic() + GUARD
    while True:
        status = svc.wait_ready(timeout=GUARD)
        if (status.state is ServiceState.READY and status.ready == replicas == status.desired
                and len(status.pods) == replicas):
            return status
        if time.monotonic() > deadline:
            pytest.fail(f"service {svc.name} not READY {replicas}/{replicas}: {status}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def svc(serve: ServeBackend) -> Service:
    """The module's service: one replica of SERVER, READY."""
    service = serve.tier.apply(serve.tier.make_spec(SERVER, name="contract-svc", readiness="/"))
    ready(service)
    return service


# --- deploy (apply) ------------------------------------------------------------------------
def test_deploy_reaches_ready_and_records_the_service(serve: ServeBackend, svc: Service) -> None:
    status = svc.status()
    assert status.state is ServiceState.READY and (status.desired, status.ready) == (1, 1)
    assert [p.ready for p in status.pods] == [True]
    assert status.endpoint and svc.url
    record = serve.tier.registry.get(svc.key)
    assert (record.kind, record.tier, record.state) == ("service", serve.name, "READY")
    assert serve.tier.attach(svc.id).key == svc.key


def test_deploy_of_an_unchanged_spec_changes_nothing(serve: ServeBackend, svc: Service) -> None:
    before = svc.status()
    again = serve.tier.apply(serve.tier.make_spec(SERVER, name="contract-svc", readiness="/"))
    assert again.key == svc.key
    after = ready(again)
    assert after.revision == before.revision
    assert [p.name for p in after.pods] == [p.name for p in before.pods]


def test_a_replica_that_keeps_exiting_is_failed_with_the_reason(serve: ServeBackend) -> None:
    crashy = serve.tier.apply(serve.tier.make_spec(CRASHES, name="contract-crash"))
    try:
        status = crashy.wait_ready(timeout=GUARD)
        assert status.state is ServiceState.FAILED, status
        pod = status.pods[0]
        reason = rf"pod {pod.name} CrashLoopBackOff \(exit 3(, \d+ restarts?)?\)"
        assert re.fullmatch(reason, status.reason or ""), status.reason
        assert f"{pod.name}: about to fail" in crashy.logs().splitlines()
    finally:
        crashy.delete()


def test_deploy_refuses_a_bad_spec_naming_the_field(serve: ServeBackend) -> None:
    spec = serve.tier.make_spec(SERVER, name="contract-bad", replicas=-1)
    with pytest.raises(SpecError, match="replicas"):
        serve.tier.apply(spec)
    assert serve.tier.registry.find_by_name(serve.tier.name, "contract-bad") is None


def test_attach_of_an_unknown_service_names_it(serve: ServeBackend) -> None:
    with pytest.raises(JobNotFound, match="no job 'no-such-service' in the registry"):
        serve.tier.attach("no-such-service")


# --- logs ----------------------------------------------------------------------------------
def test_logs_are_pod_prefixed_and_one_pods_are_not(svc: Service) -> None:
    pod = svc.status().pods[0].name
    wait_for(lambda: "serving on" in svc.logs(), "the server's first line")
    # the replica's own port: 8000 in its pod on Kubernetes, a free one behind the front locally
    assert [ln for ln in svc.logs().splitlines() if ln.startswith(f"{pod}: serving on ")]
    assert svc.logs(pod=pod).splitlines()[-1].startswith("serving on ")
    assert svc.logs(tail=1).splitlines() == [svc.logs().splitlines()[-1]]
    assert svc.logs(tail=0) == ""
    with pytest.raises(JobNotFound, match=f"service {svc.name} has no pod 'no-such-pod'"):
        svc.logs(pod="no-such-pod")


# --- watch ---------------------------------------------------------------------------------
def test_watch_delivers_the_status_until_unwatch(serve: ServeBackend, svc: Service) -> None:
    seen: list[ServiceStatus] = []
    got = threading.Event()

    def on_status(status: ServiceStatus) -> None:
        seen.append(status)
        got.set()

    sub = serve.tier.watch(svc.record, on_status=on_status)
    try:
        assert got.wait(GUARD), "no status delivered"
        assert seen[-1].name == svc.name
        wait_for(lambda: seen[-1].state is ServiceState.READY, "a READY status from the watch")
    finally:
        serve.tier.unwatch(sub)
    serve.tier.unwatch(sub)  # twice: nothing left to stop, no error


# --- scale ---------------------------------------------------------------------------------
def test_scale_up_and_back_down(svc: Service) -> None:
    svc.scale(2)
    assert len(ready(svc, 2).pods) == 2
    svc.scale(1)
    ready(svc, 1)


def test_scale_refuses_a_negative_count_naming_replicas(svc: Service) -> None:
    with pytest.raises(SpecError, match="replicas"):
        svc.scale(-1)


# --- restart (and the watch's log lines) ---------------------------------------------------
def test_restart_replaces_every_pod_and_a_watcher_gets_the_new_pods_lines(serve: ServeBackend,
                                                                          svc: Service) -> None:
    before = {p.name for p in svc.status().pods}
    lines: list[PodLogLine] = []
    sub = serve.tier.watch(svc.record, on_lines=lines.extend)
    try:
        svc.restart()

        def replaced() -> bool:
            status = svc.status()
            return (status.state is ServiceState.READY and len(status.pods) == 1
                    and not before & {p.name for p in status.pods})

        wait_for(replaced, "every pod replaced")
        new = svc.status().pods[0].name
        wait_for(lambda: any(ln.pod == new and ln.text.startswith("serving on ") for ln in list(lines)),
                 "the new pod's first line from the watch")
    finally:
        serve.tier.unwatch(sub)


# --- port_forward --------------------------------------------------------------------------
def test_port_forward_reaches_a_ready_replica(svc: Service) -> None:
    url = svc.port_forward()
    assert url.startswith("http://127.0.0.1:")
    response = svc.request("GET", "/")
    assert response.status == 200 and response.text.startswith("hello from ")
    with pytest.raises(SpecError, match="local_port"):
        svc.port_forward(-1)


# --- promote / rollback --------------------------------------------------------------------
def test_promote_without_a_canary_says_there_is_none(svc: Service) -> None:
    with pytest.raises(TiersError, match=f"service {svc.name} has no canary to promote"):
        svc.promote()


def canary_ready(svc: Service) -> ServiceStatus:
    """Wait (bounded) until the canary beside ``svc``'s stable revision has its one pod ready."""
    found: list[ServiceStatus] = []

    def both_ready() -> bool:
        status = svc.status()
        found[:] = [status]
        return (status.canary is not None and status.canary.ready == status.canary.desired == 1
                and status.ready == 1)

    wait_for(both_ready, "the canary and the stable revision ready")
    return found[0]


def test_a_canary_rolls_back_then_promotes(serve: ServeBackend) -> None:
    """--canary 50 of two replicas runs one pod of the new cell beside one of the stable; rollback
    removes it (the stable revision takes its replica back); promote makes it the service."""
    tier = serve.tier
    svc = tier.apply(tier.make_spec(SERVER, name="contract-canary", replicas=2))
    try:
        stable = ready(svc, 2).revision
        v2 = SERVER + "# v2\n"
        tier.apply(tier.make_spec(v2, name="contract-canary", replicas=2, canary=50))
        canary = canary_ready(svc).canary
        assert canary is not None and canary.percent == 50
        assert svc.rollback() == ("service contract-canary: canary removed; the stable revision is back "
                                  "to 2 replicas")
        status = ready(svc, 2)
        assert status.canary is None and status.revision == stable

        tier.apply(tier.make_spec(v2, name="contract-canary", replicas=2, canary=50))
        both = canary_ready(svc)
        # Issue 29 §3: both revisions' pods are listed, marked, and each can be asked on its own.
        tracks = {p.track: p.name for p in both.pods}
        assert sorted(p.track for p in both.pods) == ["canary", "stable"], both.pods
        for track in ("canary", "stable"):
            for _ in range(3):  # every time, not by the luck of the round
                answer = svc.request("GET", "/", track=track)
                assert answer.status == 200, (track, answer.status)
                assert answer.text == f"hello from {tracks[track]}", (track, answer.text)
        with pytest.raises(SpecError, match="track"):
            svc.request("GET", "/", track="blue")
        line = svc.promote()  # Kubernetes returns once done, the local tier as it rolls
        assert line.startswith("service contract-canary: canary promoted; ") and "all 2 replicas" in line

        def promoted() -> bool:
            status = svc.status()
            return (status.state is ServiceState.READY and status.canary is None and status.ready == 2
                    and len(status.pods) == 2 and status.revision != stable)

        wait_for(promoted, "the promoted revision on both replicas")
        with pytest.raises(TiersError, match="service contract-canary has no canary to promote"):
            svc.promote()
    finally:
        svc.delete()


def test_rollback_to_a_revision_not_kept(serve: ServeBackend, svc: Service) -> None:
    if not serve.can("revision_history"):
        with pytest.raises(Unsupported, match="rollback needs a Kubernetes profile"):
            svc.rollback(99)
        return
    with pytest.raises(TiersError, match=f"service {svc.name}: no revision 99 "):
        svc.rollback(99)


# --- delete --------------------------------------------------------------------------------
def test_delete_removes_the_service_and_is_safe_twice(serve: ServeBackend) -> None:
    doomed = serve.tier.apply(serve.tier.make_spec(SERVER, name="contract-del"))
    ready(doomed)
    doomed.delete()
    wait_for(lambda: not doomed.status().pods, "every pod of the deleted service to go")
    assert doomed.status().state is ServiceState.DELETED
    doomed.delete()  # nothing left: no error
    for verb in (lambda: doomed.scale(1), doomed.restart):
        with pytest.raises(JobNotFound, match=r"service contract-del is not running .*\(deleted\?\)"):
            verb()
    assert serve.tier.registry.get(doomed.key).state == "DELETED"
    assert doomed.stop() == "service contract-del deleted"
