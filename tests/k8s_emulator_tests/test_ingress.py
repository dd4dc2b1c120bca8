"""networking.k8s.io/v1 Ingress in the emulator, as a real 1.28 API server serves it
(/work/shared/facts/k8s-golden/13c-ingress-no-controller.json): create with and without dryRun=All,
an ingressClassName that does not exist accepted, ``status.loadBalancer`` empty until something (a
controller; here a test) writes the status subresource, 422 wording for a bad pathType and host,
list and watch by label, delete answered with a Status."""

from __future__ import annotations

import json
import threading
from typing import Any

from kubernetes import client, watch

from tests.k8s_emulator_tests.test_golden_replay import Replayer, _compare, _load

LABELS = "app.kubernetes.io/name=web,app.kubernetes.io/managed-by=jupyter-tiers"


def test_replay_13c_ingress_without_a_controller(bare, ns):
    steps = _load("13c-ingress-no-controller.json")
    r = Replayer(bare, ns)
    for i, step in enumerate(steps):
        if step["request"] is None:
            continue
        code, got = r.send(step, steps, bare.admin_token)
        _compare(step, code, got, ns, f"13c step {i}")
        want = step["response"]
        if want.get("kind") == "Ingress":
            # The object as stored (or as it would be): spec as sent, status empty, generation 1.
            assert got["spec"] == want["spec"], i
            assert got["status"] == {"loadBalancer": {}}, i
            assert got["metadata"]["generation"] == 1, i
            dry_run = (step["request"]["query"] or {}).get("dryRun") == "All"
            assert ("resourceVersion" in got["metadata"]) is not dry_run, i
        if i == 1:  # after the dry run nothing exists
            assert bare.store.get("ingresses", ns, "web") is None
        if want.get("kind") == "IngressClassList":
            assert got["items"] == []
    assert bare.store.get("ingresses", ns, "web") is None  # the last step deleted it


def _ingress(name: str = "web", host: str = "models.lab.example", path: str = "/llama",
             path_type: str = "Prefix") -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "web",
                                              "app.kubernetes.io/managed-by": "jupyter-tiers"}},
        "spec": {"ingressClassName": "nginx", "rules": [{"host": host, "http": {"paths": [{
            "path": path, "pathType": path_type,
            "backend": {"service": {"name": "web", "port": {"number": 8000}}}}]}}]},
    }


def test_status_subresource_sets_the_address_and_a_watch_sees_it(bare, ns):
    net = client.NetworkingV1Api(bare.api_client())
    net.create_namespaced_ingress(ns, _ingress())
    listed = net.list_namespaced_ingress(ns, label_selector=LABELS, _preload_content=False)
    items = json.loads(listed.data)["items"]
    assert [i["metadata"]["name"] for i in items] == ["web"]
    assert items[0]["status"] == {"loadBalancer": {}}
    rv = json.loads(listed.data)["metadata"]["resourceVersion"]

    seen: list[dict[str, Any]] = []
    got_it = threading.Event()

    def follow() -> None:
        w = watch.Watch()
        for event in w.stream(net.list_namespaced_ingress, ns, label_selector=LABELS, resource_version=rv,
                              timeout_seconds=60, _preload_content=False):
            seen.append(event)
            if (event["raw_object"].get("status") or {}).get("loadBalancer", {}).get("ingress"):
                got_it.set()
                w.stop()

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    # What a controller does once it has a load balancer: write status.loadBalancer.ingress.
    net.patch_namespaced_ingress_status("web", ns, {"status": {"loadBalancer": {"ingress": [
        {"ip": "203.0.113.7"}]}}})
    assert got_it.wait(60), seen
    thread.join(10)
    assert seen[-1]["type"] == "MODIFIED"
    stored = bare.store.get("ingresses", ns, "web")
    assert stored["status"]["loadBalancer"]["ingress"] == [{"ip": "203.0.113.7"}]
    # A spec apply keeps the status the controller wrote (status is a subresource).
    body = _ingress(path="/other")
    net.patch_namespaced_ingress("web", ns, body, field_manager="t", force=True,
                                 _content_type="application/apply-patch+yaml")
    stored = bare.store.get("ingresses", ns, "web")
    assert stored["spec"]["rules"][0]["http"]["paths"][0]["path"] == "/other"
    assert stored["metadata"]["generation"] == 2
    assert stored["status"]["loadBalancer"]["ingress"] == [{"ip": "203.0.113.7"}]


def _error(fn: Any) -> dict[str, Any]:
    try:
        fn()
    except client.ApiException as exc:
        assert exc.status == 422, exc.body
        return json.loads(exc.body)
    raise AssertionError("no error")


def test_invalid_ingresses_are_422_naming_the_field(bare, ns):
    net = client.NetworkingV1Api(bare.api_client())
    cases = [
        (_ingress(path="llama"), "spec.rules[0].http.paths[0].path", "must be an absolute path"),
        (_ingress(path="/a//b"), "spec.rules[0].http.paths[0].path", "must not contain '//'"),
        (_ingress(path="/a/.."), "spec.rules[0].http.paths[0].path", "cannot end with '/..'"),
        (_ingress(host="10.0.0.1"), "spec.rules[0].host", "must be a DNS name, not an IP address"),
        (_ingress(host="a.*.example"), "spec.rules[0].host", "a wildcard DNS-1123 subdomain"),
        (_ingress(path_type="Wrong"), "spec.rules[0].http.paths[0].pathType", 'Unsupported value: "Wrong"'),
    ]
    for body, field, words in cases:
        status = _error(lambda b=body: net.create_namespaced_ingress(ns, b, dry_run="All"))
        assert [c["field"] for c in status["details"]["causes"]] == [field], status
        assert words in status["message"], status
        assert status["message"].startswith('Ingress.networking.k8s.io "web" is invalid: '), status
    # A wildcard host is valid, and ImplementationSpecific takes any path.
    net.create_namespaced_ingress(ns, _ingress(host="*.lab.example"), dry_run="All")
    net.create_namespaced_ingress(ns, _ingress(path="anything", path_type="ImplementationSpecific"),
                                  dry_run="All")
    assert bare.store.list("ingresses", ns) == []


def test_ingress_classes_are_cluster_scoped_and_a_viewer_may_not_list_them(bare, ns):
    net = client.NetworkingV1Api(bare.api_client())
    net.create_ingress_class({"metadata": {"name": "nginx", "annotations": {
        "ingressclass.kubernetes.io/is-default-class": "true"}},
        "spec": {"controller": "k8s.io/ingress-nginx"}})
    try:
        assert [c.metadata.name for c in net.list_ingress_class().items] == ["nginx"]
        viewer = client.NetworkingV1Api(bare.api_client(bare.viewer_token(ns)))
        try:
            viewer.list_ingress_class()
        except client.ApiException as exc:
            assert exc.status == 403
            assert 'cannot list resource "ingressclasses" in API group "networking.k8s.io" at the cluster ' \
                   "scope" in json.loads(exc.body)["message"]
        else:
            raise AssertionError("a viewer listed IngressClasses")
        assert viewer.list_namespaced_ingress(ns).items == []  # the view role reads Ingresses
    finally:
        net.delete_ingress_class("nginx")
