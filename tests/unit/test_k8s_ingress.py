"""Pure: the Ingress of ``--ingress`` (render.render_ingress, through render_manifests), the
``--service-type`` override, the endpoint text of a routed service (parse.ingress_endpoint) in
every case the controller's answer (or its absence) gives, and the local tier's refusal."""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_tiers.core.errors import SpecError
from jupyter_tiers.core.model import ServeSpec
from jupyter_tiers.k8s.parse import ingress_classes, ingress_endpoint
from jupyter_tiers.k8s.render import render_ingress, render_manifests
from jupyter_tiers.local.serve_plan import check_local, not_applied
from jupyter_tiers.spec.servespec import parse_ingress, validate_serve_spec

PENDING = "pending: no address from the ingress controller yet"


def spec(**kw: Any) -> ServeSpec:
    return ServeSpec(body="print('hi')\n", name="web", image="python:3.11-slim", **kw)


def kinds(objects: list[dict[str, Any]]) -> list[str]:
    return [o["kind"] for o in objects]


def test_no_ingress_renders_none_and_the_profile_service_type_applies() -> None:
    objects = render_manifests(spec(), namespace="ns", service_type="NodePort", ingress_class="nginx")
    assert kinds(objects) == ["ConfigMap", "Deployment", "Service"]
    assert objects[-1]["spec"]["type"] == "NodePort"


def test_the_service_type_option_overrides_the_profile() -> None:
    objects = render_manifests(spec(service_type="LoadBalancer"), namespace="ns", service_type="NodePort")
    assert objects[-1]["spec"]["type"] == "LoadBalancer"


def test_the_ingress_follows_the_service_before_the_hpa() -> None:
    objects = render_manifests(
        spec(ingress=("models.lab.example/llama", "models.lab.example/v1", "api.lab.example"),
             tls_secret="lab-tls", autoscale=(1, 3, 80), cpu="1", port=9000),
        namespace="ns", ingress_class="traefik",
        ingress_annotations={"traefik.ingress.kubernetes.io/router.entrypoints": "websecure"},
        notebook="work/serve.ipynb")
    assert kinds(objects) == ["ConfigMap", "Deployment", "Service", "Ingress", "HorizontalPodAutoscaler"]
    ing = objects[3]
    assert ing["apiVersion"] == "networking.k8s.io/v1"
    assert ing["metadata"]["name"] == "web" and ing["metadata"]["namespace"] == "ns"
    assert ing["metadata"]["labels"] == {"app.kubernetes.io/name": "web",
                                         "app.kubernetes.io/managed-by": "jupyter-tiers"}
    assert ing["metadata"]["annotations"] == {
        "traefik.ingress.kubernetes.io/router.entrypoints": "websecure",
        "jupyter-tiers/notebook": "work/serve.ipynb"}
    assert ing["spec"]["ingressClassName"] == "traefik"
    assert ing["spec"]["tls"] == [{"hosts": ["models.lab.example", "api.lab.example"],
                                   "secretName": "lab-tls"}]
    backend = {"service": {"name": "web", "port": {"number": 9000}}}
    assert ing["spec"]["rules"] == [
        {"host": "models.lab.example", "http": {"paths": [
            {"path": "/llama", "pathType": "Prefix", "backend": backend},
            {"path": "/v1", "pathType": "Prefix", "backend": backend}]}},
        {"host": "api.lab.example",
         "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]}},
    ]


def test_blue_green_routes_to_the_shared_service() -> None:
    objects = render_manifests(spec(strategy="bluegreen", ingress=("a.example",)), namespace="ns",
                               color="green")
    ing = next(o for o in objects if o["kind"] == "Ingress")
    assert ing["metadata"]["name"] == "web"
    assert ing["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"] == "web"
    assert "ingressClassName" not in ing["spec"] and "tls" not in ing["spec"]


@pytest.mark.parametrize(("text", "rule"), [
    ("a.example", ("a.example", "/")),
    ("a.example/", ("a.example", "/")),
    ("*.lab.example/v1/chat", ("*.lab.example", "/v1/chat")),
    ("x-1.y/a_b~c%20d", ("x-1.y", "/a_b~c%20d")),
])
def test_parse_ingress_accepts(text: str, rule: tuple[str, str]) -> None:
    assert parse_ingress(text) == rule


@pytest.mark.parametrize(("text", "words"), [
    ("", "expected HOST[/PATH]"),
    ("/llama", "the host is missing"),
    ("A.example", "lowercase DNS name"),
    ("a..example", "lowercase DNS name"),
    ("-a.example", "lowercase DNS name"),
    ("a." + "b" * 64 + ".example", "lowercase DNS name"),
    ("*.*.example", "lowercase DNS name"),
    ("*", "lowercase DNS name"),
    ("192.168.1.1", "not an IP address"),
    ("a.example:443/x", "takes no port"),
    ("http://a.example", "without a scheme"),
    ("a.example/x y", "the path must start with '/'"),
    ("a.example/x/./y", "must not contain '/./'"),
    ("a.example/x%2Fy", "must not contain '%2F'"),
    ("a.example/x/.", "must not end with '/.'"),
    ("a.example/{x}", "the path must start with '/'"),
])
def test_parse_ingress_refuses_naming_what_is_allowed(text: str, words: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_ingress(text)
    assert info.value.field == "ingress" and words in info.value.problem


def test_spec_validation_of_routing_values() -> None:
    with pytest.raises(SpecError, match="needs --ingress"):
        validate_serve_spec(spec(tls_secret="tls"))
    with pytest.raises(SpecError, match="is given twice"):
        validate_serve_spec(spec(ingress=("a.example", "a.example/")))
    with pytest.raises(SpecError, match="not a Secret name"):
        validate_serve_spec(spec(ingress=("a.example",), tls_secret="TLS"))
    with pytest.raises(SpecError, match="ClusterIP, NodePort, LoadBalancer"):
        validate_serve_spec(spec(service_type="ExternalName"))
    with pytest.raises(SpecError, match="at most 50"):
        validate_serve_spec(spec(ingress=tuple(f"h{i}.example" for i in range(51))))
    with pytest.raises(SpecError) as info:
        render_manifests(spec(ingress=("a.example",)), namespace="ns", ingress_class="Bad_Class")
    assert info.value.field == "ingress_class"
    with pytest.raises(SpecError) as info:
        render_manifests(spec(ingress=("a.example",)), namespace="ns", ingress_annotations={"a b": "x"})
    assert info.value.field == "ingress_annotations"
    with pytest.raises(SpecError, match="at least one"):
        render_ingress("web", "ns", [], 8000)


def test_the_local_tier_refuses_routing_and_notes_the_service_type() -> None:
    for kw in ({"ingress": ("a.example",)}, {"ingress": ("a.example",), "tls_secret": "tls"}):
        with pytest.raises(SpecError) as info:
            check_local(spec(**kw))
        assert info.value.field == "ingress" and info.value.problem.startswith("Kubernetes only")
    assert "service_type=NodePort" in not_applied(spec(service_type="NodePort"))


# --- the endpoint text ---------------------------------------------------------------------------
def ingress(cls: str | None = "nginx", lb: Any = None, tls: bool = True, **extra: Any) -> dict[str, Any]:
    objects = render_manifests(spec(ingress=("models.lab.example/llama", "b.example"),
                                    tls_secret="t" if tls else None), namespace="ns", ingress_class=cls)
    obj = next(o for o in objects if o["kind"] == "Ingress")
    obj["status"] = {"loadBalancer": lb if lb is not None else {}}
    obj.update(extra)
    return obj


def test_the_address_once_the_controller_reports_it() -> None:
    assert ingress_endpoint(ingress(lb={"ingress": [{"ip": "203.0.113.7"}]}), {}) == \
        "https://models.lab.example/llama +1 more (address 203.0.113.7)"
    assert ingress_endpoint(ingress(tls=False, lb={"ingress": [{"hostname": "lb.example"}, {"ip": "::1"}]}),
                            None) == "http://models.lab.example/llama +1 more (address lb.example, ::1)"


def test_why_it_is_pending() -> None:
    head = f"{PENDING} (class nginx): "
    assert ingress_endpoint(ingress(), {}) == head + (
        "no IngressClass nginx exists in the cluster (there are: none), so no controller takes it")
    assert ingress_endpoint(ingress(), {"traefik": True}) == head + (
        "no IngressClass nginx exists in the cluster (there are: traefik), so no controller takes it")
    assert ingress_endpoint(ingress(), {"nginx": False}) == head + (
        "IngressClass nginx exists; its controller has not reported an address (still provisioning?)")
    assert ingress_endpoint(ingress(), None).startswith(head + "is a controller for nginx running?")
    none = f"{PENDING} (no ingressClassName): "
    assert ingress_endpoint(ingress(cls=None), {"traefik": True}) == none + (
        "the default IngressClass traefik's controller has not answered")
    assert ingress_endpoint(ingress(cls=None), {"traefik": False}) == none + (
        "no class is set and the cluster has no default IngressClass, so no controller takes it; "
        "set ingress_class in the profile")
    assert ingress_endpoint(None, {}, ingress_class="nginx") == head + "the Ingress is not seen yet"


@pytest.mark.parametrize("lb", [{"ingress": "203.0.113.7"}, {"ingress": [None, 3, {"ip": 7}]},
                                {"ingress": None}])
def test_a_malformed_status_is_pending_not_an_error(lb: Any) -> None:
    assert ingress_endpoint(ingress(lb=lb), {}).startswith(PENDING)
    assert ingress_endpoint({"spec": "x", "status": []}, {}).startswith(PENDING)


def test_ingress_classes_marks_the_default() -> None:
    default = {"ingressclass.kubernetes.io/is-default-class": "true"}
    items = [{"metadata": {"name": "nginx", "annotations": default}},
             {"metadata": {"name": "traefik"}}, {"metadata": {}}, {}]
    assert ingress_classes(items) == {"nginx": True, "traefik": False}


def test_the_ingress_matches_the_clients_openapi_model() -> None:
    from kubernetes.client import models

    from tests.unit.test_k8s_render import openapi_errors

    objects = render_manifests(spec(ingress=("a.example/x", "*.b.example"), tls_secret="t"), namespace="ns",
                               ingress_class="nginx", ingress_annotations={"a/b": "1"})
    ing = objects[-1]
    assert openapi_errors(ing) == []
    models.V1Ingress.model_validate(ing)
