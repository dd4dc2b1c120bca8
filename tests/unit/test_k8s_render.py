"""Rendering of a ServeSpec into Kubernetes objects: snapshots of every option, the objects checked
against the kubernetes client's OpenAPI models, validation messages, and a seeded fuzz of the
validators (only SpecError may come out)."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import random
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from jupyter_tiers.core.errors import SpecError
from jupyter_tiers.core.model import ServeSpec
from jupyter_tiers.k8s.render import (
    BODY_HASH_ANNOTATION,
    ENV_HASH_ANNOTATION,
    render_manifests,
    render_yaml,
)
from jupyter_tiers.spec.servespec import parse_autoscale, validate_serve_spec

SNAPSHOTS = Path(__file__).parent / "snapshots" / "k8s"
UPDATE = os.environ.get("JT_UPDATE_SNAPSHOTS") == "1"

BASE = ServeSpec(body="import http.server\nhttp.server.test(port=8000, bind='0.0.0.0')\n",
                 name="web", image="python:3.12-slim")

# name -> (spec, keyword arguments of render_manifests)
CASES: dict[str, tuple[ServeSpec, dict[str, Any]]] = {
    "minimal_python": (BASE, {}),
    "shell_vllm_gpu": (
        ServeSpec(
            body="vllm serve /models/llama-ft --port {port}\n",
            name="llama-svc",
            image="vllm/vllm-openai:v0.6.0",
            shell=True,
            gpus=1,
            replicas=2,
            cpu="8",
            memory="64Gi",
            readiness="/health",
            secret_env=(("HF_TOKEN", "hf-token/token"),),
            node_selector=(("nvidia.com/gpu.product", "A100-SXM4-80GB"),),
            tolerations=((("effect", "NoSchedule"), ("key", "nvidia.com/gpu"), ("operator", "Exists")),),
        ),
        {"namespace": "team-llm", "model_volume": {"pvc": "models", "sub_path": "llama-ft"},
         "notebook": "projects/llama/serve.ipynb", "service_type": "LoadBalancer",
         "image_pull_secrets": ("regcred",)},
    ),
    "env_secret_and_resources": (
        dataclasses.replace(BASE, env=(("API_KEY", "s3cr3t"), ("MODE", "prod")), cpu="500m",
                            memory="512Mi", python="/opt/venv/bin/python", image_pull_policy="Always",
                            port=9000),
        {},
    ),
    "autoscale_hpa": (
        dataclasses.replace(BASE, autoscale=(2, 8, 70), cpu="1.5", memory="1G"),
        {"service_type": "NodePort"},
    ),
    "bluegreen_green": (
        dataclasses.replace(BASE, strategy="bluegreen", env=(("TOKEN", "x"),)),
        {"color": "green"},
    ),
    "nfs_model_tolerations": (
        dataclasses.replace(
            BASE,
            replicas=0,
            tolerations=(
                (("effect", "NoExecute"), ("key", "spot"), ("operator", "Equal"), ("tolerationSeconds", "60"),
                 ("value", "true")),
                (("operator", "Exists"),),
            ),
        ),
        {"model_volume": {"nfs": {"server": "nfs.lab", "path": "/export/models"}}},
    ),
    "host_path_patch": (
        dataclasses.replace(
            BASE,
            patch=json.dumps({
                "Deployment": {"spec": {"revisionHistoryLimit": 3,
                                        "template": {"spec": {"terminationGracePeriodSeconds": 5,
                                                              "enableServiceLinks": None}}}},
                "Service": {"metadata": {"annotations": {"lb.example/internal": "true"}}},
                "ConfigMap": {"immutable": False},
            }),
        ),
        {"model_volume": {"host_path": "/data/models"}},
    ),
}


def _render(name: str) -> list[dict[str, Any]]:
    spec, kwargs = CASES[name]
    return render_manifests(spec, **{"namespace": "default", **kwargs})


def _check_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / f"{name}.yaml"
    if UPDATE:
        SNAPSHOTS.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"missing snapshot {path}; run with JT_UPDATE_SNAPSHOTS=1 to create it"
    assert text == path.read_text(encoding="utf-8"), f"{path.name} differs from the rendered YAML"


@pytest.mark.parametrize("name", sorted(CASES))
def test_snapshot(name: str) -> None:
    _check_snapshot(name, render_yaml(_render(name)))


# --- OpenAPI validation ----------------------------------------------------------------------

_MODELS = {
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("v1", "Secret"): "V1Secret",
    ("apps/v1", "Deployment"): "V1Deployment",
    ("v1", "Service"): "V1Service",
    ("autoscaling/v2", "HorizontalPodAutoscaler"): "V2HorizontalPodAutoscaler",
    ("networking.k8s.io/v1", "Ingress"): "V1Ingress",
}


def _check_type(value: Any, type_name: str, where: str, errors: list[str]) -> None:
    """Walk ``value`` against an openapi type string of the kubernetes client's models."""
    from kubernetes.client import models

    list_match = re.fullmatch(r"[Ll]ist\[(.+)\]", type_name)
    dict_match = re.fullmatch(r"[Dd]ict\(?\[?str, (.+?)\]?\)?", type_name)
    if list_match:
        if not isinstance(value, list):
            errors.append(f"{where}: expected a list ({type_name}), got {type(value).__name__}")
            return
        for i, item in enumerate(value):
            _check_type(item, list_match.group(1), f"{where}[{i}]", errors)
    elif dict_match:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            errors.append(f"{where}: expected a map ({type_name}), got {type(value).__name__}")
            return
        for key, item in value.items():
            _check_type(item, dict_match.group(1), f"{where}.{key}", errors)
    elif type_name in ("str", "bytes", "datetime", "date"):  # bytes travel as base64 text
        if not isinstance(value, str):
            errors.append(f"{where}: expected {type_name} (text), got {value!r}")
    elif type_name == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            errors.append(f"{where}: expected int, got {value!r}")
    elif type_name == "float":
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            errors.append(f"{where}: expected a number, got {value!r}")
    elif type_name == "bool":
        if not isinstance(value, bool):
            errors.append(f"{where}: expected bool, got {value!r}")
    elif type_name == "object":  # IntOrString and free-form fields
        if isinstance(value, bool) or not isinstance(value, (str, int, dict, list)):
            errors.append(f"{where}: unexpected {value!r}")
    else:
        klass = getattr(models, type_name, None)
        assert klass is not None, f"unknown openapi type {type_name} at {where}"
        if not isinstance(value, dict):
            errors.append(f"{where}: expected an object ({type_name}), got {type(value).__name__}")
            return
        by_json = {json_name: attr for attr, json_name in klass.attribute_map.items()}
        for key, item in value.items():
            if key not in by_json:
                errors.append(f"{where}.{key}: no such field in {type_name}")
                continue
            _check_type(item, klass.openapi_types[by_json[key]], f"{where}.{key}", errors)


def openapi_errors(obj: dict[str, Any]) -> list[str]:
    """Every misspelt field and wrongly typed value of a rendered object, by the client's models."""
    model = _MODELS.get((obj.get("apiVersion"), obj.get("kind")))
    if model is None:
        return [f"unknown apiVersion/kind {obj.get('apiVersion')}/{obj.get('kind')}"]
    errors: list[str] = []
    _check_type(obj, model, obj["kind"], errors)
    return errors


def test_openapi_walker_catches_misspelt_fields_and_wrong_types() -> None:
    dep = _render("minimal_python")[1]
    assert openapi_errors(dep) == []
    bad = json.loads(json.dumps(dep))
    bad["spec"]["replicaz"] = 2
    bad["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "8000"
    bad["spec"]["template"]["spec"]["containers"][0]["env"] = {"A": "b"}
    bad["metadata"]["labels"] = {"a": 1}
    errors = openapi_errors(bad)
    assert any("spec.replicaz: no such field" in e for e in errors), errors
    assert any("containerPort: expected int" in e for e in errors), errors
    assert any(".env: expected a list" in e for e in errors), errors
    assert any("labels.a: expected str" in e for e in errors), errors


@pytest.mark.parametrize("name", sorted(CASES))
def test_rendered_objects_match_the_openapi_models(name: str) -> None:
    from kubernetes.client import models

    for obj in _render(name):
        assert openapi_errors(obj) == [], obj["kind"]
        # Second opinion: the client's own (pydantic, extra=forbid, strict) models.
        getattr(models, _MODELS[(obj["apiVersion"], obj["kind"])]).model_validate(obj)


# --- what the objects say --------------------------------------------------------------------


def _by_kind(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in objects}


def test_apply_order_names_labels_and_annotations() -> None:
    objects = _render("shell_vllm_gpu")
    assert [o["kind"] for o in objects] == ["ConfigMap", "Deployment", "Service"]
    assert [o["metadata"]["name"] for o in objects] == ["llama-svc-code", "llama-svc", "llama-svc"]
    for obj in objects:
        assert obj["metadata"]["namespace"] == "team-llm"
        assert obj["metadata"]["labels"] == {
            "app.kubernetes.io/name": "llama-svc", "app.kubernetes.io/managed-by": "jupyter-tiers"}
        assert obj["metadata"]["annotations"] == {"jupyter-tiers/notebook": "projects/llama/serve.ipynb"}
    assert "annotations" not in _render("minimal_python")[0]["metadata"]


def test_container_command_probes_resources_and_volumes() -> None:
    dep = _by_kind(_render("shell_vllm_gpu"))["Deployment"]
    pod = dep["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["/bin/sh", "/jt/code/command.sh"]
    assert container["resources"] == {
        "requests": {"cpu": "8", "memory": "64Gi"},
        "limits": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1"},
    }
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert container["readinessProbe"]["periodSeconds"] == 2
    assert container["readinessProbe"]["failureThreshold"] == 3
    assert "tcpSocket" in container["livenessProbe"] and container["livenessProbe"]["initialDelaySeconds"] > 0
    hf_token = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}
    assert hf_token in container["env"]
    assert container["volumeMounts"][1] == {"name": "models", "mountPath": "/models", "readOnly": True,
                                            "subPath": "llama-ft"}
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "A100-SXM4-80GB"}
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert dep["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    assert dep["spec"]["replicas"] == 2
    svc = _by_kind(_render("shell_vllm_gpu"))["Service"]
    assert svc["spec"]["type"] == "LoadBalancer"
    assert svc["spec"]["ports"] == [{"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}]

    python = _by_kind(_render("env_secret_and_resources"))["Deployment"]["spec"]["template"]["spec"]
    assert python["containers"][0]["command"] == ["/opt/venv/bin/python", "/jt/code/main.py"]
    assert python["containers"][0]["readinessProbe"]["tcpSocket"] == {"port": "http"}


def test_env_values_live_only_in_the_secret_and_never_in_the_yaml() -> None:
    objects = _render("env_secret_and_resources")
    secret = _by_kind(objects)["Secret"]
    assert secret["metadata"]["name"] == "web-env" and secret["type"] == "Opaque"
    assert "stringData" not in secret
    assert {k: base64.b64decode(v).decode() for k, v in secret["data"].items()} == {
        "API_KEY": "s3cr3t", "MODE": "prod"}
    dep = _by_kind(objects)["Deployment"]
    env = dep["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "API_KEY", "valueFrom": {"secretKeyRef": {"name": "web-env", "key": "API_KEY"}}} in env
    assert all("s3cr3t" not in json.dumps(o) for o in objects if o["kind"] != "Secret")
    text = render_yaml(objects)
    assert "s3cr3t" not in text and base64.b64encode(b"s3cr3t").decode() not in text
    # Valid YAML, every document an object kubectl can apply; the Secret is a comment naming
    # its keys (and how to create it), with no value and no placeholder that could be applied.
    docs = list(yaml.safe_load_all(text))
    assert [d["kind"] for d in docs] == ["ConfigMap", "Deployment", "Service"]
    assert docs == [o for o in objects if o["kind"] != "Secret"]
    assert "# Secret web-env (namespace default) is not shown: it holds the --env values.\n" in text
    assert "# Keys: API_KEY, MODE." in text
    assert "create secret generic web-env --from-literal=API_KEY=... --from-literal=MODE=...\n" in text
    assert "prod" not in text
    assert {"name": "JT_PORT", "value": "9000"} in env
    assert {"name": "PORT", "value": "9000"} in env  # as on the local tier


def test_yaml_of_a_patched_secret_names_only_plain_keys_and_stays_valid() -> None:
    spec = dataclasses.replace(CASES["env_secret_and_resources"][0], patch=json.dumps(
        {"Secret": {"stringData": {"odd\nkey: injected": "v4lue", "EXTRA": "v5lue"}}}))
    objects = render_manifests(spec, namespace="default")
    text = render_yaml(objects)
    assert "v4lue" not in text and "v5lue" not in text and "injected" not in text
    assert "# Keys: API_KEY, MODE, EXTRA (and 1 more)." in text
    assert [d["kind"] for d in yaml.safe_load_all(text)] == ["ConfigMap", "Deployment", "Service"]


def test_identical_rerun_is_byte_identical_and_changes_roll_the_pods() -> None:
    spec, _ = CASES["env_secret_and_resources"]
    first = render_manifests(spec, namespace="ns")
    assert json.dumps(first) == json.dumps(render_manifests(spec, namespace="ns"))

    def template_annotations(s: ServeSpec, key: bytes | None = None) -> dict[str, str]:
        dep = _by_kind(render_manifests(s, namespace="ns", env_key=key))["Deployment"]
        return dep["spec"]["template"]["metadata"]["annotations"]

    base = template_annotations(spec)
    changed_body = template_annotations(dataclasses.replace(spec, body=spec.body + "# v2\n"))
    assert changed_body[BODY_HASH_ANNOTATION] != base[BODY_HASH_ANNOTATION]
    assert changed_body[ENV_HASH_ANNOTATION] == base[ENV_HASH_ANNOTATION]
    other_env = (("API_KEY", "other"), ("MODE", "prod"))
    changed_env = template_annotations(dataclasses.replace(spec, env=other_env))
    assert changed_env[ENV_HASH_ANNOTATION] != base[ENV_HASH_ANNOTATION]
    assert changed_env[BODY_HASH_ANNOTATION] == base[BODY_HASH_ANNOTATION]
    # keyed: another key gives another hash for the same values (a reader cannot test guesses)
    assert template_annotations(spec, b"per-user key")[ENV_HASH_ANNOTATION] != base[ENV_HASH_ANNOTATION]
    assert ENV_HASH_ANNOTATION not in template_annotations(BASE)


def test_autoscale_renders_an_hpa_and_leaves_replicas_to_it() -> None:
    objects = _by_kind(_render("autoscale_hpa"))
    hpa = objects["HorizontalPodAutoscaler"]
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 8)
    target = hpa["spec"]["metrics"][0]["resource"]["target"]
    assert target == {"type": "Utilization", "averageUtilization": 70}
    assert "replicas" not in objects["Deployment"]["spec"]


def test_bluegreen_names_and_selectors_follow_the_color() -> None:
    objects = _by_kind(_render("bluegreen_green"))
    assert objects["Deployment"]["metadata"]["name"] == "web-green"
    assert objects["ConfigMap"]["metadata"]["name"] == "web-green-code"
    assert objects["Secret"]["metadata"]["name"] == "web-green-env"
    selector = {"app.kubernetes.io/name": "web", "jupyter-tiers/color": "green"}
    assert objects["Deployment"]["spec"]["selector"]["matchLabels"] == selector
    assert objects["Service"]["spec"]["selector"] == selector
    assert objects["Service"]["metadata"]["name"] == "web"
    labels = objects["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert labels["jupyter-tiers/color"] == "green"
    blue = _by_kind(render_manifests(CASES["bluegreen_green"][0], namespace="default"))
    assert blue["Deployment"]["metadata"]["name"] == "web-blue"
    with pytest.raises(SpecError, match="blue or green"):
        render_manifests(CASES["bluegreen_green"][0], namespace="default", color="red")
    with pytest.raises(SpecError, match="only used with strategy bluegreen"):
        render_manifests(BASE, namespace="default", color="blue")


def test_patch_merges_maps_replaces_lists_and_null_removes() -> None:
    objects = _by_kind(_render("host_path_patch"))
    dep = objects["Deployment"]
    assert dep["spec"]["revisionHistoryLimit"] == 3
    assert dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 5
    assert "enableServiceLinks" not in dep["spec"]["template"]["spec"]
    assert dep["spec"]["template"]["spec"]["containers"][0]["name"] == "server"  # merged, not replaced
    assert objects["Service"]["metadata"]["annotations"] == {"lb.example/internal": "true"}
    spec = dataclasses.replace(BASE, patch=json.dumps(
        {"Deployment": {"spec": {"template": {"spec": {"tolerations": [{"operator": "Exists"}]}}}}}))
    pod = _by_kind(render_manifests(spec, namespace="default"))["Deployment"]["spec"]["template"]["spec"]
    assert pod["tolerations"] == [{"operator": "Exists"}]


def test_pods_are_hardened_by_default_and_a_patch_overrides_it() -> None:
    # 13e: these run a root image (vLLM, TGI); runAsNonRoot would not, so it is not a default.
    for case in CASES:
        pod = _by_kind(_render(case))["Deployment"]["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False, case
        assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}, case
        assert pod["containers"][0]["securityContext"] == {
            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}, case
        assert "runAsNonRoot" not in json.dumps(pod), case
    patch = {"Deployment": {"spec": {"template": {"spec": {
        "automountServiceAccountToken": True,
        "securityContext": {"seccompProfile": None, "runAsUser": 1000},
        "containers": [{"name": "server", "securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE"]},
                                                              "allowPrivilegeEscalation": None}}],
    }}}}}
    spec = dataclasses.replace(BASE, patch=json.dumps(patch))
    pod = _by_kind(render_manifests(spec, namespace="default"))["Deployment"]["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is True
    assert pod["securityContext"] == {"runAsUser": 1000}
    (server,) = pod["containers"]  # merged by name: the rest of the container is kept
    assert server["securityContext"] == {"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}
    assert server["command"] and server["readinessProbe"]
    sidecar = dataclasses.replace(BASE, patch=json.dumps({"Deployment": {"spec": {"template": {"spec": {
        "containers": [{"name": "proxy", "image": "envoy:1"}]}}}}}))
    pod = _by_kind(render_manifests(sidecar, namespace="default"))["Deployment"]["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["server", "proxy"]


def test_yaml_is_block_style_and_parses_back() -> None:
    objects = _render("shell_vllm_gpu")
    text = render_yaml(objects)
    assert text.startswith("---\n")
    assert "command.sh: |\n    vllm serve /models/llama-ft --port 8000\n" in text
    assert "&id" not in text
    assert list(yaml.safe_load_all(text)) == objects


# --- validation ------------------------------------------------------------------------------

BAD: list[tuple[dict[str, Any], str, str]] = [
    ({"name": "Web"}, "name", "starting with a letter"),
    ({"name": "9lives"}, "name", "starting with a letter"),
    ({"name": "a" * 51}, "name", "at most 50"),
    ({"name": "web\n"}, "name", "not allowed"),
    ({"image": None}, "image", "required"),
    ({"image": "Ubuntu:22.04"}, "image", "lowercase"),
    ({"image": "python:3.12 slim"}, "image", "image reference"),
    ({"replicas": -1}, "replicas", "0 to 1000"),
    ({"replicas": True}, "replicas", "0 to 1000"),
    ({"gpus": 65}, "gpus", "0 to 64"),
    ({"cpu": "2 cores"}, "cpu", "500m, 2, 1.5"),
    ({"cpu": "0"}, "cpu", "CPU quantity"),
    ({"memory": "512"}, "memory", "512Mi, 4Gi, 1G"),
    ({"memory": "4GB"}, "memory", "with a unit"),
    ({"port": 70000}, "port", "1 to 65535"),
    ({"env": (("1X", "v"),)}, "env", "not a variable name"),
    ({"env": (("JT_PORT", "1"),)}, "env", "reserved"),
    ({"env": (("KUBERNETES_SERVICE_HOST", "x"),)}, "env", "reserved"),
    ({"env": (("PORT", "1"),)}, "env", "PORT and JT_PORT"),
    ({"secret_env": (("PORT", "s/k"),)}, "secret_env", "reserved"),
    ({"secret_env": (("JT_MODEL_PATH", "s/k"),)}, "secret_env", "reserved"),
    ({"env": (("A", "1"), ("A", "2"))}, "env", "twice"),
    ({"env": (("A", 1),)}, "env", "NAME=VALUE"),
    ({"secret_env": (("TOKEN", "hf-token"),)}, "secret_env", "SECRET/KEY"),
    ({"secret_env": (("TOKEN", "Hf/token"),)}, "secret_env", "SECRET/KEY"),
    ({"env": (("A", "1"),), "secret_env": (("A", "s/k"),)}, "secret_env", "also given in env"),
    ({"readiness": "health"}, "readiness", "starting with '/'"),
    ({"readiness": "/he alth"}, "readiness", "without spaces"),
    ({"readiness": "/x\n"}, "readiness", "HTTP path"),
    ({"autoscale": (0, 3, 80), "cpu": "1"}, "autoscale", "min must be from 1"),
    ({"autoscale": (4, 3, 80), "cpu": "1"}, "autoscale", "max must be from min"),
    ({"autoscale": (1, 3, 101), "cpu": "1"}, "autoscale", "1 to 100 percent"),
    ({"autoscale": (1, 3, 80)}, "autoscale", "needs a CPU request"),
    ({"strategy": "recreate"}, "strategy", "rolling or bluegreen"),
    ({"image_pull_policy": "never"}, "image_pull_policy", "Always, IfNotPresent, Never"),
    ({"node_selector": (("bad key!", "x"),)}, "node_selector", "label key"),
    ({"node_selector": (("disk", "s s d"),)}, "node_selector", "label value"),
    ({"tolerations": ((("operator", "Maybe"),),)}, "tolerations", "Equal or Exists"),
    ({"tolerations": ((("effect", "NoRun"), ("operator", "Exists")),)}, "tolerations", "NoSchedule"),
    ({"tolerations": ((("key", "a"), ("operator", "Exists"), ("value", "b")),)}, "tolerations", "no value"),
    ({"tolerations": ((("key", "a"), ("tolerationSeconds", "5")),)}, "tolerations", "NoExecute"),
    ({"tolerations": ((("colour", "a"),),)}, "tolerations", "unknown field"),
    ({"python": "-c"}, "python", "interpreter"),
    ({"python": "python3; rm -rf /"}, "python", "interpreter"),
    ({"patch": "{not json"}, "patch", "not valid JSON"),
    ({"patch": "[1]"}, "patch", "keyed by kind"),
    ({"patch": '{"Pod": {}}'}, "patch", "unknown kind"),
    ({"patch": '{"Deployment": {"metadata": {"name": "x"}}}'}, "patch", "metadata.name"),
    ({"patch": '{"HorizontalPodAutoscaler": {}}'}, "patch", "set autoscale"),
    ({"body": "  \n"}, "body", "empty"),
]


@pytest.mark.parametrize(("changes", "field", "words"), BAD, ids=[f"{b[1]}-{i}" for i, b in enumerate(BAD)])
def test_validation_names_the_field_and_what_is_allowed(
    changes: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(SpecError) as info:
        validate_serve_spec(dataclasses.replace(BASE, **changes))
    assert info.value.field == field
    assert words in info.value.problem


@pytest.mark.parametrize("image", [
    "python", "python:3.12-slim", "vllm/vllm-openai:v0.6.0", "localhost:5000/team/app:1",
    "ghcr.io/org/img@sha256:" + "a" * 64, "registry.example.com/a/b/c:tag_1.2",
    "k8sreal.local/python:1.0",
])
def test_good_images(image: str) -> None:
    validate_serve_spec(dataclasses.replace(BASE, image=image))


@pytest.mark.parametrize(
    ("cpu", "memory"), [("500m", "512Mi"), ("2", "4Gi"), ("1.5", "1G"), ("0.25", "100k")]
)
def test_good_quantities(cpu: str, memory: str) -> None:
    validate_serve_spec(dataclasses.replace(BASE, cpu=cpu, memory=memory))


def test_profile_values_are_checked_too() -> None:
    with pytest.raises(SpecError) as info:
        render_manifests(BASE, namespace="Team")
    assert info.value.field == "namespace"
    with pytest.raises(SpecError, match="ClusterIP"):
        render_manifests(BASE, namespace="x", service_type="Ingress")
    with pytest.raises(SpecError, match="exactly one of pvc"):
        render_manifests(BASE, namespace="x", model_volume={"pvc": "a", "host_path": "/b"})
    with pytest.raises(SpecError, match="relative path"):
        render_manifests(BASE, namespace="x", model_volume={"pvc": "a", "sub_path": "../etc"})
    with pytest.raises(SpecError, match="Secret name"):
        render_manifests(BASE, namespace="x", image_pull_secrets=["Bad_Name"])


def test_parse_autoscale() -> None:
    assert parse_autoscale("2:8") == (2, 8, 80)
    assert parse_autoscale("1:4:70") == (1, 4, 70)
    assert parse_autoscale(" 1:4:70% ") == (1, 4, 70)
    for bad in ("", "4", "4:2", "0:2", "1:2:0", "1:2:200", "a:b", "1:2:3:4", "1:2\n", "-1:2", "1.5:3"):
        with pytest.raises(SpecError) as info:
            parse_autoscale(bad)
        assert info.value.field == "autoscale"


# --- fuzz ------------------------------------------------------------------------------------

_ALPHABET = "abcXYZ019_-./:@%$ \n\t\x00é/{}[]\",=~+"


def _random_value(rng: random.Random) -> Any:
    pick = rng.randrange(12)
    if pick == 0:
        return None
    if pick == 1:
        return rng.choice([0, 1, -1, 8000, 65536, 2**40, True, False, 1.5])
    if pick in (2, 3, 4):
        return "".join(rng.choice(_ALPHABET) for _ in range(rng.randrange(0, 12)))
    if pick == 5:
        return tuple((_random_text(rng), _random_text(rng)) for _ in range(rng.randrange(0, 3)))
    if pick == 6:
        return tuple(rng.choice([0, 1, 5, 101, -3, "2"]) for _ in range(rng.randrange(0, 4)))
    if pick == 7:
        return (tuple((rng.choice(["key", "operator", "value", "effect", "tolerationSeconds", "x"]),
                       rng.choice(["", "Exists", "Equal", "NoExecute", "a", "60", "x y"]))
                      for _ in range(rng.randrange(0, 4))),)
    if pick == 8:
        return rng.choice([
            '{"Deployment": {"spec": {}}}', "{", "[]", '{"Secret": 1}', '{"Service": {"kind": "x"}}',
            "1e999", '{"ConfigMap": {"metadata": {"namespace": "y"}}}', "null", "[" * 5000,
        ])
    if pick == 9:
        return [1, "a", None]
    if pick == 10:
        return {"a": "b"}
    return rng.choice(["web", "vllm/vllm-openai:v0.6.0", "500m", "4Gi", "/health", "rolling", "bluegreen",
                       "Always", "python3"])


def _random_text(rng: random.Random) -> Any:
    if rng.random() < 0.1:
        return rng.choice([None, 3, b"x"])
    return "".join(rng.choice(_ALPHABET) for _ in range(rng.randrange(0, 10)))


def test_fuzz_validation_raises_only_spec_errors() -> None:
    rng = random.Random(20261202)
    fields = [f.name for f in dataclasses.fields(ServeSpec) if f.name != "metadata"]
    outcomes = {"ok": 0, "SpecError": 0}
    for _ in range(4000):
        changes = {name: _random_value(rng) for name in rng.sample(fields, rng.randrange(1, 4))}
        spec = dataclasses.replace(BASE, **changes)
        try:
            validate_serve_spec(spec)
        except SpecError:
            outcomes["SpecError"] += 1
            continue
        outcomes["ok"] += 1
        render_manifests(spec, namespace="fuzz")  # what validates also renders
    assert outcomes["ok"] > 100 and outcomes["SpecError"] > 1000, outcomes


def test_fuzz_parse_autoscale_raises_only_spec_errors() -> None:
    rng = random.Random(7)
    pieces = ["1", "2", "0", "80", "%", ":", "-", " ", "x", "100", "101", "999999999", "\n", "٣"]
    for _ in range(5000):
        text: Any = "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 7)))
        if rng.random() < 0.02:
            text = rng.choice([None, 3, b"1:2"])
        try:
            low, high, cpu = parse_autoscale(text)
        except SpecError as exc:
            assert exc.field == "autoscale"
        else:
            assert 1 <= low <= high <= 1000 and 1 <= cpu <= 100


def test_port_token_in_a_shell_body_is_the_container_port() -> None:
    """`{port}` means the port the server must listen on, on both tiers (locally each replica's
    own port; here the container port), and only in a --shell command line."""
    shell = ServeSpec(body="serve --port {port} --label '{port}s'\n", name="tok", image="x:1", shell=True,
                      port=9000)
    config_map = _by_kind(render_manifests(shell, namespace="ns"))["ConfigMap"]
    assert config_map["data"] == {"command.sh": "serve --port 9000 --label '9000s'\n"}
    python = dataclasses.replace(BASE, body="print(f'{port}')\n", port=9000)
    python_map = _by_kind(render_manifests(python, namespace="ns"))["ConfigMap"]
    assert python_map["data"] == {"main.py": "print(f'{port}')\n"}
