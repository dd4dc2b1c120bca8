"""Routing a service through an Ingress (``--ingress``, ``--tls-secret``, ``--service-type``, the
profile's ``ingress_class`` and ``ingress_annotations``) against the Kubernetes emulator: the
Ingress is rendered and applied beside the Service, the endpoint says why it is pending until the
controller (here the test, writing the status subresource as a controller does) reports an
address, then shows that address; it goes with ``--delete`` or when the cell drops ``--ingress``;
``--dry-run`` and ``--dry-run=server`` include it. Bad values are one-line UsageErrors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from IPython.core.interactiveshell import InteractiveShell
from kubernetes import client

from jupyter_tiers.config.profiles import Profile
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.model import ServiceState
from jupyter_tiers.k8s.tier import K8sTier
from jupyter_tiers.serving.status import summary_line
from tests.k8s.conftest import IMAGE, PROFILE, SERVER, StatusLog, profile_settings, write_tiers_yaml
from tests.k8s.test_k8s_magic import ip, serve, usage_error  # noqa: F401
from tests.k8s_emulator.emulator import Emulator

ANNOTATIONS = {"nginx.ingress.kubernetes.io/proxy-body-size": "64m"}
PENDING = "pending: no address from the ingress controller yet (class nginx): "


@pytest.fixture
def routed(emulator: Emulator, k8s_namespace: str) -> Any:
    tier = K8sTier(Profile(name=PROFILE, tier="kubernetes", sources=("test",), defaults={"image": IMAGE},
                           settings={**profile_settings(emulator, k8s_namespace), "ingress_class": "nginx",
                                     "ingress_annotations": ANNOTATIONS}))
    try:
        yield tier
    finally:
        tier.close()


def ingress_of(emulator: Emulator, ns: str, name: str = "web") -> dict[str, Any] | None:
    return emulator.store.get("ingresses", ns, name)


def set_address(emulator: Emulator, ns: str, address: dict[str, str], name: str = "web") -> None:
    """What an ingress controller does once its load balancer has an address."""
    net = client.NetworkingV1Api(emulator.api_client())
    net.patch_namespaced_ingress_status(name, ns, {"status": {"loadBalancer": {"ingress": [address]}}})


def test_ingress_applied_pending_then_its_address_is_the_endpoint_then_deleted(
        routed: K8sTier, emulator: Emulator, k8s_namespace: str) -> None:
    ns = k8s_namespace
    spec = routed.make_spec(SERVER, name="web", port=8000, ingress=["models.lab.example/llama"],
                            tls_secret="models-tls", service_type="NodePort")
    service = routed.apply(spec)
    ing = ingress_of(emulator, ns)
    assert ing is not None
    assert ing["spec"]["ingressClassName"] == "nginx"
    assert ing["metadata"]["annotations"] == ANNOTATIONS
    assert ing["spec"]["tls"] == [{"hosts": ["models.lab.example"], "secretName": "models-tls"}]
    assert ing["spec"]["rules"] == [{"host": "models.lab.example", "http": {"paths": [{
        "path": "/llama", "pathType": "Prefix",
        "backend": {"service": {"name": "web", "port": {"number": 8000}}}}]}}]
    assert ing["status"] == {"loadBalancer": {}}
    assert emulator.store.get("services", ns, "web")["spec"]["type"] == "NodePort"  # the option won

    log = StatusLog()
    sub = routed.watch(service.record, on_status=log)
    try:
        pending = log.wait(lambda s: s.state is ServiceState.READY, what="READY")
        # No IngressClass exists in the emulator: the reason says so.
        assert pending.endpoint == PENDING + ("no IngressClass nginx exists in the cluster (there are: "
                                              "none), so no controller takes it"), pending.endpoint
        assert "pending: no address" in summary_line(pending)
        set_address(emulator, ns, {"ip": "203.0.113.7"})
        shown = log.wait(lambda s: not (s.endpoint or "").startswith("pending"), what="the address")
        assert shown.endpoint == "https://models.lab.example/llama (address 203.0.113.7)"
        assert summary_line(shown).endswith("— https://models.lab.example/llama (address 203.0.113.7)"
                                            + (f" (revision {shown.revision})" if shown.revision else ""))
    finally:
        routed.unwatch(sub)
    # A status read without the watch (%tiers, refresh) shows the same.
    assert service.status().endpoint == "https://models.lab.example/llama (address 203.0.113.7)"
    # The in-cluster address stays what the handle gives.
    assert service.url == f"http://web.{ns}.svc:8000"

    # Re-run without --ingress: the Ingress goes.
    routed.apply(routed.make_spec(SERVER, name="web", port=8000))
    assert ingress_of(emulator, ns) is None
    assert emulator.store.get("services", ns, "web")["spec"]["type"] == "ClusterIP"
    # With it again, then --delete: everything goes, the Ingress included.
    service = routed.apply(routed.make_spec(SERVER, name="web", port=8000, ingress=["models.lab.example"]))
    assert ingress_of(emulator, ns)["spec"]["rules"][0]["http"]["paths"][0]["path"] == "/"
    assert "tls" not in ingress_of(emulator, ns)["spec"]
    service.delete()
    assert ingress_of(emulator, ns) is None
    assert emulator.store.get("services", ns, "web") is None
    assert Registry().get("web", profile=PROFILE).state == ServiceState.DELETED.value


def test_a_hostname_address_and_an_existing_class(routed: K8sTier, emulator: Emulator,
                                                  k8s_namespace: str) -> None:
    net = client.NetworkingV1Api(emulator.api_client())
    net.create_ingress_class({"metadata": {"name": "nginx"}, "spec": {"controller": "k8s.io/ingress-nginx"}})
    try:
        service = routed.apply(routed.make_spec(SERVER, name="web", port=8000,
                                                ingress=["a.lab.example/x", "b.lab.example"]))
        status = service.status()
        assert status.endpoint == PENDING + ("IngressClass nginx exists; its controller has not reported "
                                             "an address (still provisioning?)"), status.endpoint
        set_address(emulator, k8s_namespace, {"hostname": "lb-1.elb.example"})
        assert service.status().endpoint == "http://a.lab.example/x +1 more (address lb-1.elb.example)"
        service.delete()
    finally:
        net.delete_ingress_class("nginx")


# --- the magic ---------------------------------------------------------------------------------
@pytest.fixture
def nginx_profile(isolated: Path, emulator: Emulator, k8s_namespace: str,
                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The test's tiers.yaml with ingress_class and ingress_annotations in the serving profile."""
    config = yaml.safe_load(isolated.read_text())
    config["profiles"][PROFILE].update(ingress_class="nginx", ingress_annotations=ANNOTATIONS)
    path = write_tiers_yaml(isolated.parent / "ingress-tiers.yaml", config["profiles"])
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(path))


def test_dry_runs_include_the_ingress_and_create_nothing(
        ip: InteractiveShell, capsys: pytest.CaptureFixture[str], emulator: Emulator,  # noqa: F811
        k8s_namespace: str, nginx_profile: None) -> None:
    out = serve(ip, capsys, "--dry-run --name web --ingress models.lab.example/llama --ingress "
                "*.lab.example --tls-secret models-tls --service-type LoadBalancer")
    docs = list(yaml.safe_load_all(out))
    assert [d["kind"] for d in docs] == ["ConfigMap", "Deployment", "Service", "Ingress"]
    assert docs[2]["spec"]["type"] == "LoadBalancer"
    ing = docs[3]
    assert ing["spec"]["ingressClassName"] == "nginx" and ing["metadata"]["annotations"] == ANNOTATIONS
    assert [r["host"] for r in ing["spec"]["rules"]] == ["models.lab.example", "*.lab.example"]
    assert ing["spec"]["tls"] == [{"hosts": ["models.lab.example", "*.lab.example"],
                                   "secretName": "models-tls"}]
    # The API server validates it too (dryRun=All), and nothing is created.
    out = serve(ip, capsys, "--dry-run=server --name web --ingress models.lab.example/llama "
                "--tls-secret models-tls")
    assert "ingresses/web created (server dry run)" in out.splitlines(), out
    assert out.splitlines()[-1].startswith("the API server accepted all 4 objects"), out
    assert emulator.store.list("ingresses", k8s_namespace) == []
    assert emulator.store.list("deployments", k8s_namespace) == []


def test_bad_routing_values_are_one_line_usage_errors(
        ip: InteractiveShell, capsys: pytest.CaptureFixture[str], emulator: Emulator,  # noqa: F811
        k8s_namespace: str) -> None:
    cell = "%%k8s_serve --name web {}\nprint('hi')\n"
    cases = {
        "--ingress Models_Lab": "--ingress: 'Models_Lab': the host must be a lowercase DNS name",
        "--ingress 10.1.2.3/x": "not an IP address",
        "--ingress https://a.example/x": "without a scheme",
        "--ingress a.example:8080": "takes no port",
        "--ingress a.example//x": "must not contain '//'",
        "--ingress a.example --ingress a.example/": "is given twice",
        "--tls-secret models-tls": "--tls-secret: needs --ingress HOST[/PATH]",
        "--ingress a.example --tls-secret Bad_Name": "--tls-secret: 'Bad_Name' is not a Secret name",
        "--service-type Ingress": "--service-type: invalid choice: 'Ingress'",
    }
    for options, words in cases.items():
        message = usage_error(ip, capsys, cell.format(options))
        assert words in message, (options, message)
    local = usage_error(ip, capsys, cell.format("--profile local --ingress a.example"))
    assert local.startswith("--ingress: Kubernetes only"), local
    assert emulator.store.list("ingresses", k8s_namespace) == []
    assert emulator.store.list("deployments", k8s_namespace) == []
