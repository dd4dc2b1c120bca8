"""Eviction in the emulator, as a real 1.28 cluster does it: the Eviction subresource (kubectl
drain's call) deletes the pod gracefully; node-pressure eviction by the kubelet leaves the pod
object Failed/Evicted with its containers terminated, and the ReplicaSet makes a replacement."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests import helpers
from tests.k8s_emulator.emulator import Emulator
from tests.k8s_emulator_tests.test_controllers_e2e import web_deployment

wait_for = functools.partial(helpers.wait_for, timeout=90.0, interval=0.1)


@pytest.fixture(scope="module")
def bare(  # this module's own emulator, in place of the folder's (conftest's api and ns use it)
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    e = Emulator(tmp_path_factory.mktemp("emu-evict"), kubelet_options={"backoff_base": 1.0})
    e.start()
    try:
        yield e
    finally:
        e.stop()


def _ready_pods(core: client.CoreV1Api, ns: str, name: str, n: int) -> list[Any]:
    def ready() -> list[Any] | None:
        pods = core.list_namespaced_pod(ns, label_selector=f"app.kubernetes.io/name={name}").items
        live = [p for p in pods if p.metadata.deletion_timestamp is None and p.status.phase == "Running"
                and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])]
        return live if len(live) == n else None

    return wait_for(ready, f"{n} ready pods of {name}")


def test_discovery_lists_the_eviction_subresource(api: client.ApiClient) -> None:
    resources = client.CoreV1Api(api).get_api_resources().resources
    eviction = next(r for r in resources if r.name == "pods/eviction")
    assert (eviction.group, eviction.version, eviction.kind, eviction.verbs) == (
        "policy", "v1", "Eviction", ["create"])


def test_eviction_api_deletes_the_pod_gracefully(bare: Emulator, api: client.ApiClient, ns: str) -> None:
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    dep = web_deployment("drain", replicas=1)
    (server,) = dep["spec"]["template"]["spec"]["containers"]
    server["command"] = ["sh", "-c", "trap '' TERM; exec python3 -m http.server 8000"]  # outlives SIGTERM
    apps.create_namespaced_deployment(ns, dep)
    victim = _ready_pods(core, ns, "drain", 1)[0].metadata.name
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=victim, namespace=ns),
                             delete_options=client.V1DeleteOptions(grace_period_seconds=15))
    answer = core.create_namespaced_pod_eviction(victim, ns, body, _preload_content=False)
    assert answer.status == 201
    assert json.loads(answer.data) == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                       "status": "Success", "code": 201}
    pod = core.read_namespaced_pod(victim, ns)  # gracefully: still there, terminating
    assert pod.metadata.deletion_timestamp is not None and pod.metadata.deletion_grace_period_seconds == 15
    target = next(c for c in pod.status.conditions if c.type == "DisruptionTarget")
    assert (target.status, target.reason, target.message) == (
        "True", "EvictionByEvictionAPI", "Eviction API: evicting")
    wait_for(lambda: bare.store.get("pods", ns, victim) is None, "the evicted pod to be gone")
    replacement = _ready_pods(core, ns, "drain", 1)[0].metadata.name
    assert replacement != victim
    # Evicting it again while it goes is not an error; a missing pod is a 404; a mismatched name a 400.
    with pytest.raises(ApiException) as missing:
        core.create_namespaced_pod_eviction("nope", ns, client.V1Eviction(
            metadata=client.V1ObjectMeta(name="nope")))
    assert missing.value.status == 404 and 'pods \\"nope\\" not found' in missing.value.body
    with pytest.raises(ApiException) as mismatch:
        core.create_namespaced_pod_eviction(replacement, ns, client.V1Eviction(
            metadata=client.V1ObjectMeta(name="other")))
    assert mismatch.value.status == 400
    assert "name in URL does not match name in Eviction object" in mismatch.value.body
    # dryRun leaves the pod alone
    core.create_namespaced_pod_eviction(replacement, ns, client.V1Eviction(
        metadata=client.V1ObjectMeta(name=replacement),
        delete_options=client.V1DeleteOptions(dry_run=["All"])))
    assert core.read_namespaced_pod(replacement, ns).metadata.deletion_timestamp is None


def test_eviction_needs_create_on_pods_eviction(bare: Emulator, ns: str) -> None:
    viewer = bare.viewer_token(ns)
    with bare.api_client(viewer) as api, pytest.raises(ApiException) as denied:
        client.CoreV1Api(api).create_namespaced_pod_eviction("web", ns, client.V1Eviction(
            metadata=client.V1ObjectMeta(name="web")))
    assert denied.value.status == 403
    assert 'cannot create resource "pods/eviction"' in json.loads(denied.value.body)["message"]


def test_node_pressure_eviction_leaves_a_failed_pod_and_a_replacement(
    bare: Emulator, api: client.ApiClient, ns: str
) -> None:
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    apps.create_namespaced_deployment(ns, web_deployment("pressure", replicas=2))
    before = {p.metadata.name for p in _ready_pods(core, ns, "pressure", 2)}
    evicted = bare.kubelet.evict_pods("memory", namespace=ns)
    assert set(evicted) == before
    for name in before:
        pod = core.read_namespaced_pod(name, ns)  # the object stays
        assert pod.metadata.deletion_timestamp is None
        assert (pod.status.phase, pod.status.reason) == ("Failed", "Evicted")
        assert pod.status.message.startswith(
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki. "
            "Container server was using ")
        assert pod.status.message.endswith("Ki, request is 0, has larger consumption of memory. ")
        conditions = {c.type: c for c in pod.status.conditions}
        assert (conditions["DisruptionTarget"].status, conditions["DisruptionTarget"].reason) == (
            "True", "TerminationByKubelet")
        assert (conditions["Ready"].status, conditions["Ready"].reason) == ("False", "PodFailed")
        (server,) = pod.status.container_statuses
        assert server.state.terminated is not None and server.state.terminated.exit_code != 0
        assert not server.ready
    events = core.list_namespaced_event(ns).items
    assert {e.involved_object.name for e in events if e.reason == "Evicted" and e.type == "Warning"} == before
    replacements = {p.metadata.name for p in _ready_pods(core, ns, "pressure", 2)}
    assert not replacements & before
    status = apps.read_namespaced_deployment("pressure", ns).status
    assert (status.replicas, status.ready_replicas) == (2, 2)  # the Failed pods are not replicas
    core.delete_namespaced_pod(sorted(before)[0], ns)  # an evicted pod is deleted as any other
    wait_for(lambda: bare.store.get("pods", ns, sorted(before)[0]) is None, "the evicted pod to be deleted")
