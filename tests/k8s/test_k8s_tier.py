"""K8sTier against the Kubernetes emulator: apply, idempotence and rollouts, delete, every pod
failure reason, logs across restarts and replacements, 410 relists, blue-green, autoscale,
errors, port-forward.

Objects are read back straight from the emulator's store (what the API server holds)."""

from __future__ import annotations

import base64
import json
import re
import socket
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers.config.profiles import Profile
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.errors import ApiError, ApiUnreachable, TiersError
from jupyter_tiers.core.model import PodLogLine, ServiceState, ServiceStatus
from jupyter_tiers.engine.handles import Service
from jupyter_tiers.k8s.tier import K8sTier
from jupyter_tiers.serving.status import summary_line
from tests.k8s.conftest import GUARD, IMAGE, SERVER, StatusLog, profile_settings, wait_for
from tests.k8s_emulator.emulator import Emulator

try:
    from jupyter_tiers.app.viewstate import serve as serve_state
except ImportError:  # the widget's pure state module is written separately
    serve_state = None  # type: ignore[assignment]

SECRET_VALUE = "s3cr3t-value-never-shown"
SUMMARY_READY = re.compile(r"^service (\S+) READY (\d+)/(\d+) in \d\d:\d\d:\d\d — (http://\S+)")


# --- helpers -----------------------------------------------------------------------------------
def objects(emulator: Emulator, resource: str, ns: str, name: str | None = None) -> list[dict[str, Any]]:
    """The service's objects of one resource in the namespace (by the tier's labels)."""
    sel = {"app.kubernetes.io/managed-by": "jupyter-tiers"}
    if name:
        sel["app.kubernetes.io/name"] = name
    return emulator.store.list(resource, ns, label_selector=sel)


def get(emulator: Emulator, resource: str, ns: str, name: str) -> dict[str, Any] | None:
    return emulator.store.get(resource, ns, name)


def live_pods(emulator: Emulator, ns: str, name: str) -> list[dict[str, Any]]:
    return [p for p in objects(emulator, "pods", ns, name) if not p["metadata"].get("deletionTimestamp")]


def ready_and_settled(emulator: Emulator, ns: str, name: str, n: int, deployment: str | None = None) -> bool:
    """The Deployment is rolled out with n available and exactly n pods exist (old ones gone)."""
    dep = get(emulator, "deployments", ns, deployment or name)
    if dep is None:
        return False
    st = dep.get("status") or {}
    return (st.get("availableReplicas", 0) == n and st.get("updatedReplicas", 0) == n
            and st.get("replicas", 0) == n and len(objects(emulator, "pods", ns, name)) == n)


def wait_ready(service: Service, timeout: float = GUARD) -> ServiceStatus:
    status = service.wait_ready(timeout)
    assert status.state is ServiceState.READY, (status, service.logs())
    return status


def apply_server(tier: K8sTier, name: str = "web", **options: Any) -> Service:
    options.setdefault("port", 8000)
    return tier.apply(tier.make_spec(SERVER, name=name, **options))


def assert_one_line(text: str) -> None:
    assert text and "\n" not in text, text


# --- 1. apply ----------------------------------------------------------------------------------
def test_apply_creates_objects_and_keeps_env_values_out_of_everything(
        tier: K8sTier, emulator: Emulator, k8s_namespace: str, tmp_path: Path) -> None:
    ns = k8s_namespace
    spec = tier.make_spec(SERVER, name="web", replicas=2, port=8000,
                          env=(("API_TOKEN", SECRET_VALUE),))
    rendered = tier.render(spec)
    assert SECRET_VALUE not in rendered
    assert base64.b64encode(SECRET_VALUE.encode()).decode() not in rendered
    assert "# Secret web-env" in rendered and "# Keys: API_TOKEN." in rendered

    service = tier.apply(spec)
    assert [o["metadata"]["name"] for o in objects(emulator, "configmaps", ns, "web")] == ["web-code"]
    assert [o["metadata"]["name"] for o in objects(emulator, "secrets", ns, "web")] == ["web-env"]
    assert [o["metadata"]["name"] for o in objects(emulator, "deployments", ns, "web")] == ["web"]
    assert [o["metadata"]["name"] for o in objects(emulator, "services", ns, "web")] == ["web"]
    assert objects(emulator, "horizontalpodautoscalers", ns, "web") == []
    secret = get(emulator, "secrets", ns, "web-env")
    assert secret is not None
    assert base64.b64decode(secret["data"]["API_TOKEN"]).decode() == SECRET_VALUE

    deployment_text = json.dumps(get(emulator, "deployments", ns, "web"))
    assert SECRET_VALUE not in deployment_text
    assert base64.b64encode(SECRET_VALUE.encode()).decode() not in deployment_text
    assert SECRET_VALUE not in service.record.script and SECRET_VALUE not in service.script
    assert SECRET_VALUE not in json.dumps(service.record.spec)

    status = wait_ready(service)
    assert (status.ready, status.desired, status.available) == (2, 2, 2)
    assert len(status.pods) == 2 and all(p.ready for p in status.pods)
    # Hardened by default (13e), and such pods run: no API token, no privilege escalation,
    # no capabilities, the runtime's seccomp profile.
    for pod in objects(emulator, "pods", ns, "web"):
        assert pod["spec"]["automountServiceAccountToken"] is False
        assert pod["spec"]["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
        assert pod["spec"]["containers"][0]["securityContext"] == {
            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert service.url == f"http://web.{ns}.svc:8000"
    assert status.endpoint == service.url
    line = tier.summary(service.record, status)
    m = SUMMARY_READY.match(line)
    assert m and m.group(1) == "web" and m.group(2) == m.group(3) == "2" and m.group(4) == service.url, line

    registry = Registry()
    records = registry.list(kind="service")
    assert [(r.name, r.kind, r.tier, r.profile) for r in records] == [
        ("web", "service", "kubernetes", "serving")]
    assert records[0].state == ServiceState.READY.value  # wait_ready recorded it
    # The pods really got the value (through the Secret), and nothing on disk holds it.
    db = Path(registry.path) if hasattr(registry, "path") else tmp_path / "registry.sqlite"
    for path in [db, *db.parent.glob(db.name + "*")]:
        assert SECRET_VALUE.encode() not in path.read_bytes(), path


def test_apply_env_reaches_the_pod(tier: K8sTier, k8s_namespace: str) -> None:
    body = SERVER.replace('print("serving on"',
                          'print("token", os.environ["API_TOKEN"][::-1]); print("serving on"')
    service = tier.apply(tier.make_spec(body, name="envy", env=(("API_TOKEN", SECRET_VALUE),)))
    wait_ready(service)
    assert SECRET_VALUE[::-1] in wait_for(lambda: service.logs(), what="log")


# --- 2. idempotent re-apply, rolling change ---------------------------------------------------
def test_unchanged_reapply_is_a_noop_and_a_change_rolls(
        tier: K8sTier, emulator: Emulator, k8s_namespace: str) -> None:
    ns = k8s_namespace
    service = apply_server(tier, replicas=2)
    wait_ready(service)
    wait_for(lambda: ready_and_settled(emulator, ns, "web", 2), what="rollout settled")
    dep = get(emulator, "deployments", ns, "web")
    assert dep is not None
    rs_before = [r["metadata"]["name"] for r in emulator.store.list("replicasets", ns)]
    pods_before = {p["metadata"]["name"] for p in live_pods(emulator, ns, "web")}
    assert len(rs_before) == 1

    again = apply_server(tier, replicas=2)
    dep2 = get(emulator, "deployments", ns, "web")
    assert dep2 is not None
    assert dep2["metadata"]["generation"] == dep["metadata"]["generation"]
    assert dep2["metadata"]["resourceVersion"] == dep["metadata"]["resourceVersion"]
    for kind, obj in (("configmaps", "web-code"), ("services", "web")):
        before = get(emulator, kind, ns, obj)
        apply_server(tier, replicas=2)
        after = get(emulator, kind, ns, obj)
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert [r["metadata"]["name"] for r in emulator.store.list("replicasets", ns)] == rs_before
    assert {p["metadata"]["name"] for p in live_pods(emulator, ns, "web")} == pods_before
    assert again.status().state is ServiceState.READY

    revision = int(dep["metadata"]["annotations"]["deployment.kubernetes.io/revision"])
    changed = tier.apply(tier.make_spec(SERVER.replace("hello from", "hi from"), name="web", replicas=2,
                                        port=8000))
    dep3 = get(emulator, "deployments", ns, "web")
    assert dep3 is not None and dep3["metadata"]["generation"] == dep["metadata"]["generation"] + 1
    wait_for(lambda: ready_and_settled(emulator, ns, "web", 2) and
             len(emulator.store.list("replicasets", ns)) == 2, what="second rollout settled")
    status = wait_ready(changed)
    rs_after = {r["metadata"]["name"] for r in emulator.store.list("replicasets", ns)}
    assert len(rs_after - set(rs_before)) == 1
    assert status.revision == str(revision + 1)
    pods_after = {p["metadata"]["name"] for p in live_pods(emulator, ns, "web")}
    assert len(pods_after) == 2 and not pods_after & pods_before
    assert "(revision 2)" in tier.summary(changed.record, status)


# --- 3. delete ---------------------------------------------------------------------------------
RESOURCES = ("deployments", "services", "configmaps", "secrets", "horizontalpodautoscalers")


def test_delete_removes_everything(tier: K8sTier, emulator: Emulator, k8s_namespace: str) -> None:
    ns = k8s_namespace
    service = apply_server(tier, env=(("A", "b"),), autoscale="1:3:50", cpu="100m")
    assert all(objects(emulator, r, ns, "web") for r in RESOURCES)
    log = StatusLog()
    sub = tier.watch(service.record, on_status=log)
    try:
        log.wait(lambda s: s.state is ServiceState.READY, what="READY")
        service.delete()
        log.wait(lambda s: s.state is ServiceState.DELETED, what="DELETED")
    finally:
        tier.unwatch(sub)
    for resource in RESOURCES:
        assert objects(emulator, resource, ns, "web") == [], resource
    wait_for(lambda: not objects(emulator, "pods", ns, "web"), what="pods gone")
    assert service.status().state is ServiceState.DELETED
    assert Registry().get("web", profile="serving").state == ServiceState.DELETED.value
    service.delete()  # deleting again is harmless


def test_delete_bluegreen_removes_both_colours(tier: K8sTier, emulator: Emulator, k8s_namespace: str) -> None:
    ns = k8s_namespace
    first = apply_server(tier, strategy="bluegreen", env=(("A", "b"),))
    wait_ready(first)
    # A second colour that never gets ready: both colours' objects exist side by side.
    second = tier.apply(tier.make_spec("import time\ntime.sleep(3600)\n", name="web", port=8000,
                                       strategy="bluegreen", env=(("A", "b"),)))
    names = lambda r: sorted(o["metadata"]["name"] for o in objects(emulator, r, ns, "web"))  # noqa: E731
    assert names("deployments") == ["web-blue", "web-green"]
    assert names("configmaps") == ["web-blue-code", "web-green-code"]
    assert names("secrets") == ["web-blue-env", "web-green-env"]
    second.delete()
    for resource in RESOURCES:
        assert objects(emulator, resource, ns, "web") == [], resource
    assert second.status().state is ServiceState.DELETED


# --- 4. every pod reason -----------------------------------------------------------------------
def settle(tier: K8sTier, service: Service, pred: Any, what: str, timeout: float = GUARD) -> ServiceStatus:
    log = StatusLog()
    sub = tier.watch(service.record, on_status=log)
    try:
        return log.wait(pred, timeout, what)
    finally:
        tier.unwatch(sub)


def check_reason_everywhere(tier: K8sTier, service: Service, status: ServiceStatus, reason: str,
                            words: str | None = None) -> str:
    """``reason`` (and ``words``) in the ServiceStatus, the summary line and the widget state."""
    pods = [p for p in status.pods if p.reason == reason]
    assert pods, status
    assert reason in (status.reason or ""), status
    line = tier.summary(service.record, status)
    assert_one_line(line)
    assert reason in line, line
    plain = summary_line(status)
    assert reason in plain, plain
    if words:
        assert words in (pods[0].message or "") + (status.reason or ""), status
        assert words in line, line
    if serve_state is not None:
        import time

        traits = serve_state.status_traits(status, time.time())
        assert traits["state"] == status.state.value
        assert reason in traits["reason"]
        problems = [row[6] for row in traits["pods"]]
        assert any(reason in p for p in problems), problems
        if words:
            assert any(words in p for p in problems), problems
    else:
        print("jupyter_tiers.app.viewstate.serve missing: widget state not checked")
    return line


def test_reason_err_image_never_pull(tier: K8sTier) -> None:
    service = apply_server(tier, name="never", image="example.com/absent:1", image_pull_policy="Never")
    status = settle(tier, service, lambda s: s.state is ServiceState.FAILED, "FAILED")
    check_reason_everywhere(tier, service, status, "ErrImageNeverPull", "example.com/absent:1")


def test_reason_image_pull_backoff(tier: K8sTier) -> None:
    service = apply_server(tier, name="pull", image="example.com/absent:1", image_pull_policy="IfNotPresent")
    status = settle(tier, service, lambda s: s.state is ServiceState.FAILED, "FAILED")
    reason = next(p.reason for p in status.pods if p.reason)
    assert reason in ("ErrImagePull", "ImagePullBackOff"), status
    check_reason_everywhere(tier, service, status, reason)
    status = settle(tier, service, lambda s: any(p.reason == "ImagePullBackOff" for p in s.pods),
                    "ImagePullBackOff")
    check_reason_everywhere(tier, service, status, "ImagePullBackOff", "example.com/absent:1")


def test_reason_crashloop_exit_1_with_last_line(tier: K8sTier) -> None:
    body = "print('starting', flush=True)\nimport no_such_module_here\n"
    service = tier.apply(tier.make_spec(body, name="crash"))
    status = settle(tier, service, lambda s: s.state is ServiceState.FAILED and
                    any(p.reason == "CrashLoopBackOff" for p in s.pods), "CrashLoopBackOff")
    pod = next(p for p in status.pods if p.reason == "CrashLoopBackOff")
    assert pod.exit_code == 1
    line = check_reason_everywhere(tier, service, status, "CrashLoopBackOff")
    assert "cause: ModuleNotFoundError: No module named 'no_such_module_here'" in line, line
    assert "fix: the image has no Python module 'no_such_module_here'" in line, line
    # The emulator shows `terminated: Error` for most of each back-off, as a real kubelet does:
    # the summary, the pod row and the widget still say CrashLoopBackOff with the restarts.
    restarts = f"{pod.restarts} restart{'s' if pod.restarts != 1 else ''}"
    assert f"pod {pod.name} CrashLoopBackOff (exit 1, {restarts})" in line, line
    if serve_state is not None:
        problems = [row[6] for row in serve_state.status_traits(status, 0.0)["pods"]]
        assert f"CrashLoopBackOff (exit 1, {restarts})" in problems, problems
    later = settle(tier, service, lambda s: max((p.restarts for p in s.pods), default=0) > pod.restarts,
                   "restarts growing")
    assert max(p.restarts for p in later.pods) > pod.restarts


def unschedulable(status: ServiceStatus) -> bool:
    return any(p.reason == "Unschedulable" for p in status.pods)


def test_reason_unschedulable_node_selector(tier: K8sTier) -> None:
    service = apply_server(tier, name="nowhere", node_selector=("disktype=ssd",))
    status = settle(tier, service, unschedulable, "Unschedulable")
    check_reason_everywhere(tier, service, status, "Unschedulable",
                            "didn't match Pod's node affinity/selector")


def test_reason_insufficient_gpu(tier: K8sTier) -> None:
    service = apply_server(tier, name="gpu", gpus=1)
    status = settle(tier, service, unschedulable, "Unschedulable")
    check_reason_everywhere(tier, service, status, "Unschedulable", "Insufficient nvidia.com/gpu")


def test_reason_oomkilled(tier: K8sTier) -> None:
    body = ("print('allocating', flush=True)\nblob = bytearray(300 * 1024 * 1024)\n"
            "blob[::4096] = b'x' * len(blob[::4096])\nimport time\ntime.sleep(60)\n")
    service = tier.apply(tier.make_spec(body, name="oom", memory="40Mi"))
    # Wait for the service's reason, not only the pod's: a first kill not yet restarted is a
    # rollout in progress (crash looping only once restarted), a window a busy machine can catch.
    status = settle(tier, service, lambda s: "OOMKilled" in (s.reason or "")
                    and any(p.reason == "OOMKilled" for p in s.pods), "OOMKilled")
    pod = next(p for p in status.pods if p.reason == "OOMKilled")
    assert pod.exit_code == 137, pod
    check_reason_everywhere(tier, service, status, "OOMKilled")


def test_reason_readiness_never_passes_progress_deadline(tier: K8sTier) -> None:
    spec = tier.make_spec(SERVER.replace("self.send_response(200)", "self.send_response(503)"),
                          name="unready", readiness="/healthz",
                          patch={"Deployment": {"spec": {"progressDeadlineSeconds": 3}}})
    service = tier.apply(spec)
    unhealthy = settle(tier, service, lambda s: any(p.reason == "Unhealthy" and "503" in (p.message or "")
                                                    for p in s.pods), "Unhealthy: readiness 503")
    assert unhealthy.state is ServiceState.DEPLOYING
    assert "503" in (unhealthy.reason or ""), unhealthy
    status = settle(tier, service, lambda s: s.state is ServiceState.FAILED, "FAILED")
    assert "ProgressDeadlineExceeded" in json.dumps(service.tier.client.call(  # type: ignore[attr-defined]
        service.tier.client.apps().read_namespaced_deployment, "unready", service.record.spec["namespace"],
        _preload_content=False, verb="get", resource="deployments").data.decode())
    assert "progress deadline" in (status.reason or ""), status
    line = tier.summary(service.record, status)
    assert_one_line(line)
    assert "FAILED" in line and "progress deadline" in line and "Unhealthy" in line, line
    if serve_state is not None:
        import time

        traits = serve_state.status_traits(status, time.time())
        assert traits["state"] == "FAILED" and "progress deadline" in traits["reason"]


# --- 5. logs across restarts and replacement --------------------------------------------------
LOG_FOLLOWS = ("GET", "pods/{name}/log", True)  # the emulator's count of log follow requests


def test_one_log_request_per_container_start(tier: K8sTier, emulator: Emulator, k8s_namespace: str) -> None:
    """Following 2 replicas from before they exist until they are ready and steady makes one log
    request per pod, as ``kubectl logs -f`` would: none while a container is being created."""
    before = emulator.server.requests_snapshot(k8s_namespace)  # only this test's requests
    service = apply_server(tier, name="quiet", replicas=2)
    got: list[PodLogLine] = []
    statuses = StatusLog()
    sub = tier.watch(service.record, on_status=statuses, on_lines=got.extend)
    try:
        statuses.wait(lambda s: s.state is ServiceState.READY, GUARD, "READY")
        wait_for(lambda: len({ln.pod for ln in list(got) if ln.text.startswith("serving on")}) == 2,
                 what="the first line of both pods", show=lambda: got)
        time.sleep(3.0)  # steady for a moment: a follower that reopened would show in the count
        counts = emulator.server.requests_snapshot(k8s_namespace) - before
    finally:
        tier.unwatch(sub)
    assert counts[LOG_FOLLOWS] == 2, counts
    # Status: Deployments and pods listed then watched; Events synced by one watch from 0.
    assert [counts[("GET", kind, False)] for kind in ("deployments", "pods", "events")] == [1, 1, 0], counts
    assert [counts[("GET", kind, True)] for kind in ("deployments", "pods", "events")] == [1, 1, 1], counts
    pods = objects(emulator, "pods", k8s_namespace, "quiet")
    assert all(p["status"]["containerStatuses"][0]["restartCount"] == 0 for p in pods)


COUNTER = """\
import os, time
for i in range(5):
    print("line", i, os.environ["HOSTNAME"], flush=True)
    time.sleep(0.05)
time.sleep(0.5)
"""


def test_logs_survive_restarts_and_replacement(tier: K8sTier, emulator: Emulator, k8s_namespace: str) -> None:
    ns = k8s_namespace
    before = emulator.server.requests_snapshot(ns)  # only this test's requests
    service = tier.apply(tier.make_spec(COUNTER, name="counter"))
    got: list[PodLogLine] = []
    sub = tier.watch(service.record, on_lines=got.extend)
    try:
        def instances(pod: str) -> list[list[int]]:
            """This pod's lines split into container instances (each counts 0..4)."""
            runs: list[list[int]] = []
            for ln in [x for x in list(got) if x.pod == pod and not x.text.startswith("— restart")]:
                n = int(ln.text.split()[1])
                if n == 0 or not runs:
                    runs.append([])
                runs[-1].append(n)
            return runs

        first = wait_for(lambda: next((p.pod for p in got), None), what="first line")
        wait_for(lambda: len(instances(first)) >= 3 and instances(first)[-1] == list(range(5)),
                 what="three container instances of the first pod", show=lambda: (instances(first), got))
        sent = (emulator.server.requests_snapshot(ns) - before)[LOG_FOLLOWS]
        pod = get(emulator, "pods", ns, first)  # read after the count: restarts only grow
        assert pod is not None and pod["status"]["containerStatuses"][0]["restartCount"] >= 2
        # One log stream per container start, none while the container is being created and
        # none again while it waits out a back-off (the follow would repeat the last instance).
        starts = pod["status"]["containerStatuses"][0]["restartCount"] + 1
        assert 3 <= sent <= starts, (sent, starts)
        for ln in got:
            assert ln.text.startswith("— restart") or ln.text.split()[2] == ln.pod
            assert ln.at  # timestamped
        runs = instances(first)
        # Issue 29 §5: each restart begins with a marker, and every line says its restart.
        mine = [ln for ln in list(got) if ln.pod == first]
        markers = [(i, ln) for i, ln in enumerate(mine) if ln.text.startswith("— restart")]
        expected = [f"— restart {k} —" for k in range(1, len(markers) + 1)]
        assert [ln.text for _, ln in markers] == expected, mine
        assert len(markers) >= len(runs) - 1 >= 2, (markers, runs)
        for k, (i, marker) in enumerate(markers, start=1):
            assert marker.restart == k and mine[i + 1].text.startswith("line 0 "), mine
        bounds = [0] + [i for i, _ in markers] + [len(mine)]
        for k in range(len(bounds) - 1):
            assert {ln.restart for ln in mine[bounds[k]:bounds[k + 1]]} <= {k}, (k, mine)
        assert all(run == list(range(5)) for run in runs[:-1]), runs  # nothing lost or repeated
        assert runs[-1] == list(range(len(runs[-1])))

        service.restart()
        second = wait_for(lambda: next((p.pod for p in list(got) if p.pod != first), None),
                          what="a line of the replacement pod")
        wait_for(lambda: instances(second) and instances(second)[0] == list(range(5)),
                 what="the new pod's first instance", show=lambda: (instances(second), got))
        assert second.rsplit("-", 2)[0] == "counter"
        assert instances(second)[0] == list(range(5))
        for pod_name in (first, second):
            runs = instances(pod_name)
            assert all(run == list(range(len(run))) for run in runs), (pod_name, runs)
            assert all(len(run) == 5 for run in runs[:-1]), (pod_name, runs)
    finally:
        tier.unwatch(sub)
    # The one-shot log has the current lines of each pod, prefixed by pod name. Waited for: it is
    # the current container instance's, and one that has just restarted has printed nothing yet.
    wait_for(lambda: f"{second}: line 0 {second}" in service.logs(), what="the one-shot log's line 0",
             show=lambda: service.logs())


# --- 6. a 410 mid-watch ------------------------------------------------------------------------
def test_a_watch_opened_right_after_apply_never_says_deleted(tier: K8sTier, emulator: Emulator) -> None:
    """The namespace's shared watch can lag behind the apply made just before a view subscribes
    (here each watch event waits 1 s, as on a loaded API server): its cache has no Deployment
    yet. DELETED is then neither delivered nor recorded; the view waits for the watch (a direct
    read says the service is there). The blue-green switch once gave up on this lag."""
    wait_ready(apply_server(tier, name="lagbase"))  # the namespace's watch is up and running
    states: list[ServiceState] = []
    emulator.server.watch_event_delay = 1.0
    try:
        service = apply_server(tier, name="lagged")
        sub = tier.watch(service.record, on_status=lambda status: states.append(status.state))
        try:
            wait_for(lambda: ServiceState.READY in states, what="the lagged service READY")
        finally:
            sub.close()
    finally:
        emulator.server.watch_event_delay = 0.0
    assert ServiceState.DELETED not in states, states
    record = Registry().find_by_name(tier.name, "lagged")
    assert record is not None and record.state == ServiceState.READY.value, record


def test_watch_relists_after_410_and_loses_nothing(tier: K8sTier, emulator: Emulator) -> None:
    service = apply_server(tier, replicas=1)
    log = StatusLog()
    sub = tier.watch(service.record, on_status=log)
    try:
        log.wait(lambda s: s.state is ServiceState.READY and s.ready == 1, what="READY 1/1")
        nsw = tier._watch_of_namespace()

        def relists() -> int:
            return sum(kw.relists_after_gone for kw in nsw.kinds.values())

        def expire_watches(already: int) -> bool:
            """Forget the history and drop every watch: one resuming from a version that is
            now too old gets 410 and must list again."""
            emulator.compact()
            emulator.store.close_watchers()
            return relists() > already

        service.scale(3)
        wait_for(lambda: expire_watches(0), what="a relist after 410", interval=0.2)
        status = log.wait(lambda s: s.state is ServiceState.READY and s.ready == 3 and len(s.pods) == 3
                          and all(p.ready for p in s.pods), what="READY 3/3 with three ready pods")
        assert status.desired == 3 and len([p for p in status.pods if p.ready]) == 3
        now = service.status()
        assert (now.state, now.ready, now.desired, len(now.pods)) == (ServiceState.READY, 3, 3, 3)

        done = relists()
        service.scale(1)  # pods are deleted while the watches are down: the relist must notice
        wait_for(lambda: expire_watches(done), what="another relist after 410", interval=0.2)
        status = log.wait(lambda s: s.state is ServiceState.READY and s.desired == 1
                          and len(s.pods) == 1 and s.pods[0].ready, what="READY 1/1 with one ready pod")
        assert status.pods[0].ready
    finally:
        tier.unwatch(sub)


# --- 7. blue-green -----------------------------------------------------------------------------
def test_bluegreen_changes_that_leave_the_pods_alone_stay_on_the_live_colour(
        tier: K8sTier, emulator: Emulator, k8s_namespace: str) -> None:
    """Replicas, Service type or Ingress change in place; only a pod change switches colour."""
    ns = k8s_namespace
    wait_ready(apply_server(tier, name="bgi", strategy="bluegreen"))
    scaled = apply_server(tier, name="bgi", strategy="bluegreen", replicas=2, ingress=["bgi.example.test"])
    assert scaled.record.spec["deployment"] == "bgi-blue"
    assert get(emulator, "deployments", ns, "bgi-green") is None
    dep = get(emulator, "deployments", ns, "bgi-blue")
    assert dep is not None and dep["spec"]["replicas"] == 2
    assert get(emulator, "ingresses", ns, "bgi") is not None
    wait_ready(scaled)
    changed = tier.apply(tier.make_spec(SERVER + "\n# changed\n", name="bgi", port=8000,
                                        strategy="bluegreen", replicas=2, ingress=["bgi.example.test"]))
    assert changed.record.spec["deployment"] == "bgi-green"  # new code: a new colour
    tier.wait_switched("bgi", GUARD)


def test_bluegreen_switches_only_when_the_new_colour_is_ready(
        tier: K8sTier, emulator: Emulator, k8s_namespace: str, tmp_path: Path) -> None:
    ns = k8s_namespace
    service = apply_server(tier, name="bg", strategy="bluegreen")
    wait_ready(service)
    svc = get(emulator, "services", ns, "bg")
    assert svc is not None and svc["spec"]["selector"]["jupyter-tiers/color"] == "blue"

    gate = tmp_path / "open-the-gate"
    slow = f"import os, time\nwhile not os.path.exists({str(gate)!r}):\n    time.sleep(0.1)\n" + SERVER
    green = tier.apply(tier.make_spec(slow, name="bg", strategy="bluegreen"))
    assert green.record.spec["deployment"] == "bg-green"
    wait_for(lambda: live_pods(emulator, ns, "bg") and len(live_pods(emulator, ns, "bg")) == 2,
             what="a green pod next to the blue one")
    green_dep = get(emulator, "deployments", ns, "bg-green")
    assert green_dep is not None and not (green_dep.get("status") or {}).get("availableReplicas")
    svc = get(emulator, "services", ns, "bg")
    assert svc is not None and svc["spec"]["selector"]["jupyter-tiers/color"] == "blue"
    assert get(emulator, "deployments", ns, "bg-blue") is not None

    gate.write_text("go")
    tier.wait_switched("bg", GUARD)
    svc = get(emulator, "services", ns, "bg")
    assert svc is not None and svc["spec"]["selector"]["jupyter-tiers/color"] == "green"
    assert get(emulator, "deployments", ns, "bg-blue") is None
    assert get(emulator, "configmaps", ns, "bg-blue-code") is None
    status = green.status()
    assert status.state is ServiceState.READY and status.ready == 1
    assert all(p.name.startswith("bg-green-") for p in status.pods if p.phase != "Terminating")


def test_a_bluegreen_switch_waits_out_a_lagging_watch(tier: K8sTier, emulator: Emulator,
                                                     k8s_namespace: str) -> None:
    """The switch starts watching the new colour the moment it is created; with each watch event
    held 1 s (a loaded API server) the watch has not seen it yet and says DELETED. The switch
    once gave up on that and left the old colour live for good; it now switches."""
    ns = k8s_namespace
    wait_ready(apply_server(tier, name="bgl", strategy="bluegreen"))
    emulator.server.watch_event_delay = 1.0
    try:
        green = tier.apply(tier.make_spec(SERVER + "\n# green\n", name="bgl", port=8000,
                                          strategy="bluegreen"))
        assert green.record.spec["deployment"] == "bgl-green"
        assert tier.wait_switched("bgl", GUARD), "the switch still waits"
    finally:
        emulator.server.watch_event_delay = 0.0
    svc = get(emulator, "services", ns, "bgl")
    assert svc is not None and svc["spec"]["selector"]["jupyter-tiers/color"] == "green"
    assert get(emulator, "deployments", ns, "bgl-blue") is None


def test_bluegreen_switch_ends_when_the_service_is_deleted_meanwhile(
        tier: K8sTier, emulator: Emulator, k8s_namespace: str, tmp_path: Path) -> None:
    """A green colour that never gets ready, then the service deleted: the pending switch ends
    (it does not wait out its 15 minutes) and brings nothing back."""
    ns = k8s_namespace
    wait_ready(apply_server(tier, name="bgd", strategy="bluegreen"))
    never = f"import os, time\nwhile not os.path.exists({str(tmp_path / 'never')!r}):\n    time.sleep(0.1)\n"
    green = tier.apply(tier.make_spec(never + SERVER, name="bgd", strategy="bluegreen"))
    assert green.record.spec["deployment"] == "bgd-green"
    wait_for(lambda: len(live_pods(emulator, ns, "bgd")) == 2, what="a green pod next to the blue one")
    tier.delete(green.record)
    assert tier.wait_switched("bgd", GUARD), "the switch still waits for a deleted colour"
    assert objects(emulator, "deployments", ns, "bgd") == []
    svc = get(emulator, "services", ns, "bgd")
    assert svc is None or svc["metadata"].get("deletionTimestamp")


# --- 8. autoscale ------------------------------------------------------------------------------
def test_autoscale_applies_an_hpa_and_no_replicas(tier: K8sTier, emulator: Emulator,
                                                  k8s_namespace: str) -> None:
    ns = k8s_namespace
    spec = tier.make_spec(SERVER, name="auto", autoscale="2:5:60", replicas=4, cpu="100m")
    rendered = tier.render(spec)
    assert "kind: HorizontalPodAutoscaler" in rendered and "apiVersion: autoscaling/v2" in rendered
    service = tier.apply(spec)
    hpa = get(emulator, "horizontalpodautoscalers", ns, "auto")
    assert hpa is not None and hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["minReplicas"] == 2 and hpa["spec"]["maxReplicas"] == 5
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "auto"}
    metric = hpa["spec"]["metrics"][0]["resource"]
    assert metric["name"] == "cpu" and metric["target"]["averageUtilization"] == 60
    dep = get(emulator, "deployments", ns, "auto")
    assert dep is not None
    managed = [m for m in dep["metadata"].get("managedFields") or [] if m.get("manager") == "jupyter-tiers"]
    assert managed and all("f:replicas" not in json.dumps(m.get("fieldsV1")) for m in managed)
    # The HPA brings the Deployment up to its minimum.
    status = settle(tier, service, lambda s: s.state is ServiceState.READY and s.desired == 2, "READY 2/2")
    assert status.ready == 2
    # Dropping autoscale removes the HPA.
    tier.apply(tier.make_spec(SERVER, name="auto", replicas=1))
    assert get(emulator, "horizontalpodautoscalers", ns, "auto") is None


# --- 9. errors ---------------------------------------------------------------------------------
def test_forbidden_apply_names_verb_and_resource(emulator: Emulator, k8s_namespace: str,
                                                 tmp_path: Path) -> None:
    token = emulator.viewer_token(k8s_namespace)
    kubeconfig = emulator.write_kubeconfig(tmp_path / "viewer.kubeconfig", token)
    viewer = K8sTier(Profile(name="viewer", tier="kubernetes",
                             settings=profile_settings(emulator, k8s_namespace, kubeconfig),
                             defaults={"image": IMAGE}))
    try:
        with pytest.raises(ApiError) as info:
            viewer.apply(viewer.make_spec(SERVER, name="web"))
    finally:
        viewer.close()
    message = str(info.value)
    assert isinstance(info.value, TiersError) and info.value.status == 403
    assert_one_line(message)
    assert "403" in message and "patch" in message and "configmaps" in message, message


def test_missing_namespace_is_a_404_naming_it(emulator: Emulator) -> None:
    tier = K8sTier(Profile(name="nons", tier="kubernetes", settings=profile_settings(emulator, "no-such-ns"),
                           defaults={"image": IMAGE}))
    try:
        with pytest.raises(ApiError) as info:
            tier.apply(tier.make_spec(SERVER, name="web"))
    finally:
        tier.close()
    message = str(info.value)
    assert_one_line(message)
    assert info.value.status == 404 and "no-such-ns" in message, message


def test_unreachable_api(emulator: Emulator, tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kubeconfig = emulator.write_kubeconfig(tmp_path / "closed.kubeconfig")
    kubeconfig.write_text(kubeconfig.read_text().replace(emulator.server.url, f"http://127.0.0.1:{port}"))
    tier = K8sTier(Profile(name="closed", tier="kubernetes",
                           settings={"kubeconfig": str(kubeconfig), "namespace": "default",
                                     "request_timeout": 5},
                           defaults={"image": IMAGE}))
    try:
        with pytest.raises(ApiUnreachable) as info:
            tier.apply(tier.make_spec(SERVER, name="web"))
    finally:
        tier.close()
    message = str(info.value)
    assert isinstance(info.value, TiersError)
    assert_one_line(message)
    assert f"127.0.0.1:{port}" in message, message


# --- 10. port-forward --------------------------------------------------------------------------
def test_port_forward_answers_http(tier: K8sTier) -> None:
    service = apply_server(tier, name="pf")
    wait_ready(service)
    url = service.port_forward()
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url), url
    for _ in range(2):  # one WebSocket per connection: a second request works too
        with urllib.request.urlopen(url + "/", timeout=30) as resp:
            body = resp.read().decode()
        assert body.startswith("hello from pf-"), body
    # A taken or impossible local port is a one-line TiersError, not a raw OSError.
    taken = int(url.rsplit(":", 1)[1])
    with pytest.raises(TiersError, match=f"cannot listen on 127.0.0.1:{taken}"):
        service.port_forward(taken)
    with pytest.raises(TiersError, match="local_port"):
        service.port_forward(70000)


def test_port_forward_without_a_ready_pod_is_a_clear_error(tier: K8sTier) -> None:
    service = apply_server(tier, name="nopf", node_selector=("disktype=ssd",))
    with pytest.raises(TiersError, match="no ready pod"):
        service.port_forward()


# --- bounded log reads (issue 20 item 10) --------------------------------------------------------
CHATTY = """\
import os, time
for i in range(3000):
    print(f"line {i:05d} " + "x" * 90, flush=i == 2999)
print("last line", flush=True)
time.sleep(600)
"""


def test_a_log_read_is_bounded_and_keeps_the_newest_lines(
        tier: K8sTier, monkeypatch: pytest.MonkeyPatch) -> None:
    """``service_logs`` asks each pod for its last lines within a byte budget (tailLines +
    limitBytes); limitBytes keeps the window's start, so a window too big is asked again with
    fewer lines: the newest line is always there, and a marker says earlier output was cut."""
    from jupyter_tiers.engine import tier as tier_module

    service = tier.apply(tier.make_spec(CHATTY, name="chatty"))
    wait_for(lambda: "last line" in service.logs(tail=1), what="the pod's last line")
    monkeypatch.setattr(tier_module, "MAX_SERVICE_LOG_BYTES", 64 << 10)  # under the log's 300 kB
    text = service.logs()
    lines = text.splitlines()
    assert lines[0].startswith("[earlier output cut — at most the last 20000 lines"), lines[:2]
    assert lines[-1].endswith(": last line") and lines[-2].endswith("line 02999 " + "x" * 90)
    assert len(text.encode()) < 64 << 10
    numbers = [int(ln.split()[2]) for ln in lines[1:-1]]
    assert numbers == list(range(numbers[0], 3000)), "a contiguous tail, no line cut in two"
    # The line bound alone (no tail asked): the last N lines and the marker.
    monkeypatch.setattr(tier_module, "MAX_SERVICE_LOG_BYTES", 4 << 20)
    monkeypatch.setattr(tier_module, "MAX_SERVICE_LOG_LINES", 100)
    lines = service.logs().splitlines()
    assert len(lines) == 101 and lines[0].startswith("[earlier output cut — at most the last 100 lines")
    assert lines[-1].endswith(": last line")
    # A tail the read can give in full needs no marker; one pod's log has the marker too.
    assert service.logs(tail=5).splitlines()[-1].endswith(": last line")
    assert not service.logs(tail=5).startswith("[earlier")
    pod = lines[-1].split(": ", 1)[0]
    assert service.logs(pod=pod).splitlines()[0].startswith("[earlier output cut")
