"""Watches (resume, 410, bookmarks, timeouts), list pagination, scale, delete and auth."""

from __future__ import annotations

import json
import threading

import pytest
from kubernetes import client, watch

from .conftest import deployment


def _cm(name: str, **data: str) -> dict:
    return {"metadata": {"name": name, "labels": {"app": "w"}}, "data": dict(data)}


def _raw_watch(api: client.ApiClient, path: str) -> list[dict]:
    """Read a whole watch response (it must end by itself) as parsed JSON lines."""
    resp = api.rest_client.request(
        "GET",
        api.configuration.host + path,
        headers={
            "Accept": "application/json",
            "Authorization": api.configuration.get_api_key_with_prefix("BearerToken"),
        },
    )
    lines = resp.read().decode().splitlines()
    return [json.loads(x) for x in lines if x.strip()]


def test_watch_resumes_from_resource_version(api, ns):
    core = client.CoreV1Api(api)
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    core.create_namespaced_config_map(ns, _cm("a", x="1"))
    core.patch_namespaced_config_map("a", ns, {"data": {"x": "2"}})
    core.delete_namespaced_config_map("a", ns)
    seen = [
        (e["type"], e["object"].metadata.name, (e["object"].data or {}).get("x"))
        for e in watch.Watch().stream(
            core.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=1
        )
    ]
    assert seen == [("ADDED", "a", "1"), ("MODIFIED", "a", "2"), ("DELETED", "a", "2")]


def test_watch_without_rv_sends_synthetic_added_first(api, ns):
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map(ns, _cm("b"))
    names = [
        e["object"].metadata.name
        for e in watch.Watch().stream(core.list_namespaced_config_map, ns, timeout_seconds=1)
    ]
    assert names == ["b", "kube-root-ca.crt"]


def test_watch_live_events_and_label_selector(api, ns):
    core = client.CoreV1Api(api)
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    got: list[tuple[str, str]] = []
    w = watch.Watch()

    def consume() -> None:
        for e in w.stream(
            core.list_namespaced_config_map,
            ns,
            resource_version=rv,
            label_selector="app=w",
            timeout_seconds=60,
        ):
            got.append((e["type"], e["object"].metadata.name))
            if len(got) == 2:
                w.stop()

    t = threading.Thread(target=consume)
    t.start()
    core.create_namespaced_config_map(ns, {"metadata": {"name": "unlabelled"}})
    core.create_namespaced_config_map(ns, _cm("c"))
    core.delete_namespaced_config_map("c", ns)
    t.join(60)
    assert got == [("ADDED", "c"), ("DELETED", "c")]


def test_watch_after_compaction_is_410_error_event(api, ns, bare):
    core = client.CoreV1Api(api)
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    core.create_namespaced_config_map(ns, _cm("d"))
    bare.compact()
    events = _raw_watch(api, f"/api/v1/namespaces/{ns}/configmaps?watch=true&resourceVersion={rv}")
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert (status["kind"], status["status"], status["reason"], status["code"]) == (
        "Status",
        "Failure",
        "Expired",
        410,
    )
    assert status["message"].startswith(f"too old resource version: {rv} (")
    with pytest.raises(client.ApiException) as exc:
        list(watch.Watch().stream(core.list_namespaced_config_map, ns, resource_version=rv))
    assert exc.value.status == 410


def test_bookmarks_and_timeout(api, ns):
    core = client.CoreV1Api(api)
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    events = _raw_watch(
        api,
        f"/api/v1/namespaces/{ns}/configmaps?watch=true&allowWatchBookmarks=true"
        f"&timeoutSeconds=4&resourceVersion={rv}",
    )
    assert events and {e["type"] for e in events} == {"BOOKMARK"}
    obj = events[0]["object"]
    assert obj["kind"] == "ConfigMap" and obj["apiVersion"] == "v1"
    assert set(obj["metadata"]) == {"resourceVersion", "creationTimestamp"}


def test_send_initial_events_is_422(api, ns):
    core = client.CoreV1Api(api)
    with pytest.raises(client.ApiException) as exc:
        core.list_namespaced_config_map(
            ns,
            watch=True,
            send_initial_events=True,
            resource_version_match="NotOlderThan",
            _preload_content=False,
        )
    assert exc.value.status == 422
    assert "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled" in (
        exc.value.body.decode() if isinstance(exc.value.body, bytes) else exc.value.body
    )


def test_list_limit_and_continue(api, ns, bare):
    core = client.CoreV1Api(api)
    for i in range(3):
        core.create_namespaced_config_map(ns, _cm(f"w{i}"))
    page = core.list_namespaced_config_map(ns, limit=1)
    names = [page.items[0].metadata.name]
    assert page.metadata.remaining_item_count == 3
    while page.metadata._continue:
        page = core.list_namespaced_config_map(ns, limit=1, _continue=page.metadata._continue)
        names += [i.metadata.name for i in page.items]
    assert names == ["kube-root-ca.crt", "w0", "w1", "w2"]
    token = core.list_namespaced_config_map(ns, limit=1).metadata._continue
    core.patch_namespaced_config_map("w0", ns, {"data": {"k": "v"}})
    bare.compact()
    with pytest.raises(client.ApiException) as exc:
        core.list_namespaced_config_map(ns, limit=1, _continue=token)
    assert exc.value.status == 410
    body = json.loads(exc.value.body)
    assert body["reason"] == "Expired" and body["metadata"]["continue"]
    assert body["message"].startswith("The provided continue parameter is too old")
    assert len(core.list_namespaced_config_map(ns, field_selector="metadata.name=w1").items) == 1


def test_delete_semantics_and_gc(api, ns, bare):
    apps = client.AppsV1Api(api)
    made = apps.create_namespaced_deployment(ns, deployment("web"))
    owner = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "web",
        "uid": made.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    rs = bare.store.create(
        "replicasets",
        {"metadata": {"name": "web-1", "namespace": ns, "ownerReferences": [owner]}, "spec": {"replicas": 0}},
    )
    apps.delete_namespaced_deployment("web", ns, propagation_policy="Foreground")
    assert bare.store.get("replicasets", ns, "web-1") is None
    assert bare.store.get("deployments", ns, "web") is None
    apps.create_namespaced_deployment(ns, deployment("web"))
    status = apps.delete_namespaced_deployment("web", ns)  # the typed API hands back the Status as a dict
    assert status["status"] == "Success" and status["details"]["group"] == "apps"
    with pytest.raises(client.ApiException) as exc:
        apps.delete_namespaced_deployment("web", ns)
    assert exc.value.status == 404 and 'deployments.apps \\"web\\" not found' in exc.value.body
    assert rs["metadata"]["uid"]


def test_foreground_delete_returns_object_while_dependents_remain(api, ns, bare):
    apps = client.AppsV1Api(api)
    made = apps.create_namespaced_deployment(ns, deployment("web"))
    owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": made.metadata.uid}
    bare.store.create(
        "configmaps",
        {
            "metadata": {
                "name": "dep",
                "namespace": ns,
                "ownerReferences": [owner],
                "finalizers": ["test/hold"],
            }
        },
    )
    out = apps.delete_namespaced_deployment("web", ns, propagation_policy="Foreground")
    assert out["kind"] == "Deployment"
    assert out["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert out["metadata"]["deletionTimestamp"] and out["metadata"]["deletionGracePeriodSeconds"] == 0
    # The dependent is Terminating (its own finalizer); clearing it lets both go.
    held = bare.store.get("configmaps", ns, "dep")
    assert held["metadata"]["deletionTimestamp"]
    held["metadata"]["finalizers"] = []
    bare.store.update("configmaps", held)
    assert bare.store.get("configmaps", ns, "dep") is None
    assert bare.store.get("deployments", ns, "web") is None


def test_auth_401_and_viewer_403(bare, ns):
    viewer = bare.api_client(bare.viewer_token(ns))
    apps = client.AppsV1Api(viewer)
    assert apps.list_namespaced_deployment(ns).items == []
    with pytest.raises(client.ApiException) as exc:
        apps.patch_namespaced_deployment(
            "sa-web",
            ns,
            deployment("sa-web"),
            field_manager="jupyter-tiers",
            _content_type="application/apply-patch+yaml",
        )
    assert exc.value.status == 403
    assert json.loads(exc.value.body)["message"] == (
        f'deployments.apps "sa-web" is forbidden: User "system:serviceaccount:{ns}:viewer" cannot patch '
        f'resource "deployments" in API group "apps" in the namespace "{ns}"'
    )
    with pytest.raises(client.ApiException) as exc:
        client.CoreV1Api(viewer).list_namespaced_secret(ns)
    assert exc.value.status == 403
    bad = client.CoreV1Api(bare.api_client("not-a-token"))
    with pytest.raises(client.ApiException) as exc:
        bad.list_namespaced_pod(ns)
    assert exc.value.status == 401
    assert json.loads(exc.value.body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }


def test_services_get_cluster_ip_and_node_port(api, ns):
    core = client.CoreV1Api(api)
    svc = core.create_namespaced_service(
        ns,
        {
            "metadata": {"name": "s"},
            "spec": {"type": "NodePort", "selector": {"a": "b"}, "ports": [{"port": 80, "targetPort": 8000}]},
        },
    )
    assert svc.spec.cluster_ip.startswith("10.0.0.")
    assert 30000 <= svc.spec.ports[0].node_port <= 32767
    deleted = core.delete_namespaced_service("s", ns)
    assert deleted.kind == "Service"


def test_patch_content_types(api, ns):
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map(ns, _cm("p", a="1"))
    core.patch_namespaced_config_map("p", ns, {"data": {"b": "2"}})  # strategic merge
    core.patch_namespaced_config_map(
        "p", ns, [{"op": "replace", "path": "/data/a", "value": "3"}]
    )  # json patch
    cm = core.patch_namespaced_config_map(
        "p", ns, {"data": {"b": None}}, _content_type="application/merge-patch+json"
    )
    assert cm.data == {"a": "3"}
    cm.data["c"] = "4"
    assert core.replace_namespaced_config_map("p", ns, cm).data == {"a": "3", "c": "4"}
    with pytest.raises(client.ApiException) as exc:
        core.replace_namespaced_config_map("p", ns, cm)  # stale resourceVersion
    assert exc.value.status == 409
