"""Controllers, kubelet, logs and port-forward through the official ``kubernetes`` client."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.stream import portforward

from tests import helpers
from tests.k8s_emulator.emulator import Emulator

wait_for = functools.partial(helpers.wait_for, timeout=90.0, interval=0.1)


@pytest.fixture(scope="module")
def bare(  # this module's own emulator, in place of the folder's (conftest's api and ns use it)
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    e = Emulator(
        tmp_path_factory.mktemp("bare"),
        kubelet_options={"backoff_base": 1.0},
        controller_options={"hpa_sync": 1.0},
    )
    e.start()
    try:
        yield e
    finally:
        e.stop()


def web_deployment(
    name: str, replicas: int = 2, probe_port: int = 8000, deadline: int = 600
) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "progressDeadlineSeconds": deadline,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "server",
                            "image": "python:3.11-slim",
                            "command": ["python3", "-m", "http.server", "8000"],
                            "ports": [{"name": "http", "containerPort": 8000}],
                            "readinessProbe": {
                                "httpGet": {"path": "/", "port": probe_port},
                                "periodSeconds": 1,
                                "failureThreshold": 1,
                            },
                        }
                    ],
                },
            },
        },
    }


def test_deployment_rolls_out_with_golden_status(api: client.ApiClient, ns: str) -> None:
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    apps.create_namespaced_deployment(ns, web_deployment("web"))

    def done() -> Any:
        d = apps.read_namespaced_deployment("web", ns)
        st = d.status
        return (
            (st.observed_generation or 0) >= d.metadata.generation
            and st.updated_replicas == 2
            and st.available_replicas == 2
            and st.replicas == 2
            and d
        )

    d = wait_for(done, what="rollout")
    # The raw JSON keeps the server's key order (the typed model would not).
    raw = json.loads(apps.read_namespaced_deployment("web", ns, _preload_content=False).data)["status"]
    assert list(raw) == [
        "observedGeneration",
        "replicas",
        "updatedReplicas",
        "readyReplicas",
        "availableReplicas",
        "conditions",
    ]
    conds = {c["type"]: (c["status"], c["reason"]) for c in raw["conditions"]}
    assert conds == {
        "Available": ("True", "MinimumReplicasAvailable"),
        "Progressing": ("True", "NewReplicaSetAvailable"),
    }
    rs = apps.list_namespaced_replica_set(ns).items
    assert len(rs) == 1 and rs[0].metadata.name == f"web-{rs[0].metadata.labels['pod-template-hash']}"
    assert d.metadata.annotations["deployment.kubernetes.io/revision"] == "1"
    pods = core.list_namespaced_pod(ns, label_selector="app.kubernetes.io/name=web").items
    assert len(pods) == 2 and all(p.metadata.name.startswith(rs[0].metadata.name + "-") for p in pods)
    events = [e.message for e in core.list_namespaced_event(ns).items if e.reason == "ScalingReplicaSet"]
    assert f"Scaled up replica set {rs[0].metadata.name} to 2" in events

    # Port-forward into one of the two pods that both listen on 8000.
    pf = portforward(
        core.connect_get_namespaced_pod_portforward, pods[0].metadata.name, ns, ports="8000,9999"
    )
    s = pf.socket(8000)
    s.setblocking(True)
    s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    assert data.startswith(b"HTTP/1.0 200 OK")
    err = wait_for(lambda: pf.error(9999), what="error of the closed port")
    assert err.startswith("error forwarding port 9999 to pod ")
    assert "IPv4: dial tcp4 127.0.0.1:9999: connect: connection refused" in err
    assert pf.error(8000) is None

    # Rollout restart: a second ReplicaSet, revision 2, the old one kept at 0.
    apps.patch_namespaced_deployment(
        "web",
        ns,
        {
            "spec": {
                "template": {
                    "metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "2026-12-02T17:18:50Z"}}
                }
            }
        },
    )
    wait_for(
        lambda: (
            (d2 := done())
            and d2.metadata.annotations["deployment.kubernetes.io/revision"] == "2"
            and len(core.list_namespaced_pod(ns).items) == 2
        ),
        what="restart rollout",
    )
    sets = {r.metadata.name: r.spec.replicas for r in apps.list_namespaced_replica_set(ns).items}
    assert sorted(sets.values()) == [0, 2]


def test_a_write_of_replicas_and_template_scales_the_old_replicaset_first(
        api: client.ApiClient, ns: str) -> None:
    """kube-controller-manager serves a scaling event (spec.replicas against the active
    ReplicaSet's desired-replicas annotation) before any rollout: a lone active ReplicaSet is
    scaled to the new count even when the same write changed the template, so a pod of the OLD
    template starts, then the rollout replaces it (deployment controller ``sync``/``scale``)."""
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    apps.create_namespaced_deployment(ns, web_deployment("sc", replicas=1))
    wait_for(lambda: (apps.read_namespaced_deployment("sc", ns).status.available_replicas or 0) == 1,
             what="1 available")
    first = apps.list_namespaced_replica_set(ns).items[0].metadata.labels["pod-template-hash"]
    apps.patch_namespaced_deployment("sc", ns, {"spec": {"replicas": 2, "template": {"metadata": {
        "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-12-04T19:00:00Z"}}}}})

    def rolled() -> bool:
        d = apps.read_namespaced_deployment("sc", ns)
        return ((d.status.observed_generation or 0) >= d.metadata.generation and d.status.replicas == 2
                and d.status.updated_replicas == 2 and d.status.available_replicas == 2)

    wait_for(rolled, what="2 of the new template")
    scaled = [e.message for e in core.list_namespaced_event(ns).items if e.reason == "ScalingReplicaSet"]
    assert f"Scaled up replica set sc-{first} to 2 from 1" in scaled  # the old template, first


def test_portforward_errors(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    with pytest.raises(ApiException) as e:
        portforward(core.connect_get_namespaced_pod_portforward, "does-not-exist", ns, ports="8000")
    assert "404" in e.value.reason and 'pods \\"does-not-exist\\" not found' in e.value.reason
    core.create_namespaced_pod(
        ns,
        {
            "metadata": {"name": "pending"},
            "spec": {
                "nodeSelector": {"disktype": "ssd"},
                "containers": [{"name": "c", "image": "python:3.11-slim"}],
            },
        },
    )
    with pytest.raises(ApiException) as e:
        portforward(core.connect_get_namespaced_pod_portforward, "pending", ns, ports="8000")
    assert "pod pending does not have a host assigned" in e.value.reason
    assert core.read_namespaced_pod_log("pending", ns) in (None, "")


def test_readiness_never_passes_progress_deadline(api: client.ApiClient, ns: str) -> None:
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    apps.create_namespaced_deployment(
        ns, web_deployment("fail-probe", replicas=1, probe_port=9999, deadline=3)
    )

    def progressing() -> Any:
        st = apps.read_namespaced_deployment("fail-probe", ns).status
        return next(
            (
                c
                for c in st.conditions or []
                if c.type == "Progressing" and c.reason == "ProgressDeadlineExceeded"
            ),
            None,
        )

    cond = wait_for(progressing, what="ProgressDeadlineExceeded")
    rs = apps.list_namespaced_replica_set(ns).items[0].metadata.name
    assert cond.status == "False" and cond.message == f'ReplicaSet "{rs}" has timed out progressing.'
    st = apps.read_namespaced_deployment("fail-probe", ns).status
    assert st.unavailable_replicas == 1 and not st.available_replicas
    msgs = [e.message for e in core.list_namespaced_event(ns).items if e.reason == "Unhealthy"]
    assert msgs and msgs[0].startswith('Readiness probe failed: Get "http://10.88.')
    assert re.fullmatch(
        r'Readiness probe failed: Get "http://(10\.88\.\d+\.\d+):9999/": '
        r"dial tcp \1:9999: connect: connection refused",
        msgs[0],
    )


def test_log_follow_ends_with_the_instance_and_previous(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    script = "import time\nfor i in range(1, 5):\n    print(f'line {i}', flush=True)\n    time.sleep(0.3)\n"
    core.create_namespaced_pod(
        ns,
        {
            "metadata": {"name": "logger"},
            "spec": {
                "terminationGracePeriodSeconds": 0,
                "containers": [
                    {"name": "app", "image": "python:3.11-slim", "command": ["python3", "-u", "-c", script]}
                ],
            },
        },
    )
    wait_for(
        lambda: (
            (p := core.read_namespaced_pod("logger", ns)).status.container_statuses
            and p.status.container_statuses[0].state.running
        ),
        what="running",
    )
    resp = core.read_namespaced_pod_log("logger", ns, follow=True, _preload_content=False)
    text = b"".join(resp.read_chunked()).decode()
    assert text == "line 1\nline 2\nline 3\nline 4\n"  # the stream ended with the instance
    wait_for(
        lambda: core.read_namespaced_pod("logger", ns).status.container_statuses[0].restart_count >= 1,
        what="restart",
    )
    assert core.read_namespaced_pod_log("logger", ns, previous=True) == "line 1\nline 2\nline 3\nline 4\n"
    with pytest.raises(ApiException) as e:
        core.read_namespaced_pod_log("logger", ns, container="nope")
    assert e.value.status == 400


def test_hpa_without_metrics(api: client.ApiClient, ns: str) -> None:
    apps, hpa_api = client.AppsV1Api(api), client.AutoscalingV2Api(api)
    apps.create_namespaced_deployment(ns, web_deployment("web", replicas=5))
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1,
            "maxReplicas": 3,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}},
                }
            ],
        },
    }
    hpa_api.create_namespaced_horizontal_pod_autoscaler(ns, hpa)
    ghost = {
        **hpa,
        "metadata": {"name": "ghost"},
        "spec": {
            **hpa["spec"],
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "does-not-exist"},
        },
    }
    hpa_api.create_namespaced_horizontal_pod_autoscaler(ns, ghost)
    # Without metrics the controller only clamps: 5 -> maxReplicas 3.
    wait_for(lambda: apps.read_namespaced_deployment("web", ns).spec.replicas == 3, what="clamp to max")
    g = wait_for(
        lambda: hpa_api.read_namespaced_horizontal_pod_autoscaler("ghost", ns).status.conditions,
        what="ghost conditions",
    )
    assert (g[0].type, g[0].status, g[0].reason) == ("AbleToScale", "False", "FailedGetScale")
    assert g[0].message == (
        "the HPA controller was unable to get the target's current scale: "
        'deployments/scale.apps "does-not-exist" not found'
    )

    def scaling_active() -> Any:
        st = hpa_api.read_namespaced_horizontal_pod_autoscaler("web", ns).status
        return next((c for c in st.conditions or [] if c.type == "ScalingActive"), None)

    c = wait_for(scaling_active, what="ScalingActive")
    assert (c.status, c.reason) == ("False", "FailedGetResourceMetric")
    assert c.message.startswith(
        "the HPA was unable to compute the replica count: failed to get cpu utilization"
    )
