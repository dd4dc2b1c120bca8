"""Pure rendering of a ServeSpec into the Kubernetes objects of one service.

Nothing here does I/O or imports the ``kubernetes`` client. :func:`render_manifests` returns plain
dicts in apply order; the tier applies them with server-side apply under one field manager, so an
identical re-run renders byte-identical objects and changes nothing on the cluster, while a changed
body or env rolls the pods (their hashes sit in the pod template's annotations).

Objects (``NAME`` is the service name; with blue-green, ``D`` is ``NAME-<color>``, else ``NAME``):

- ConfigMap ``D-code``: the cell body under ``main.py`` (Python) or ``command.sh`` (shell, with
  ``{port}`` replaced by the container port, as the local tier replaces it by the replica's);
- Secret ``D-env`` (only when there is env): the env values, base64 in ``data``;
- Deployment ``D``: one container ``server`` running the body from ``/jt/code``, with a
  memory-backed ``/dev/shm`` (volume ``dshm``, ``--shm-size``; the runtime's 64 MiB is too
  little for model servers) unless ``--shm-size 0``;
- Service ``NAME``: port ``spec.port`` -> the container port named ``http``;
- Ingress ``NAME`` (networking.k8s.io/v1) when ``ingress`` is set: one rule per HOST[/PATH]
  (pathType Prefix) to the Service's port, TLS for those hosts with ``tls_secret``;
- HorizontalPodAutoscaler ``NAME`` (autoscaling/v2, CPU utilization) when ``autoscale`` is set.

Every object carries ``app.kubernetes.io/name=NAME`` and ``app.kubernetes.io/managed-by=jupyter-tiers``.
Env values never appear anywhere but in the Secret, which :func:`render_yaml` shows as a comment
naming its keys only.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from ..core.errors import SpecError
from ..core.model import SERVICE_TYPES, ServeSpec

# The spec's validation (servespec.py); the renderer reuses its toleration and patch parsers.
from ..spec.servespec import (
    _CONFIG_KEY,
    _DNS1123_SUBDOMAIN,
    _parse_patch,
    _toleration,
    check_ingress_annotations,
    check_ingress_class,
    parse_ingress,
    shm_size_of,
    validate_serve_spec,
)

MANAGER = "jupyter-tiers"
NAME_LABEL = "app.kubernetes.io/name"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
COLOR_LABEL = "jupyter-tiers/color"
NOTEBOOK_ANNOTATION = "jupyter-tiers/notebook"
BODY_HASH_ANNOTATION = "jupyter-tiers/body-hash"
ENV_HASH_ANNOTATION = "jupyter-tiers/env-hash"
MODEL_FROM_ANNOTATION = "jupyter-tiers/model-from"

CONTAINER_NAME = "server"
PORT_NAME = "http"
CODE_DIR = "/jt/code"
MODEL_DIR = "/models"
SHM_VOLUME = "dshm"  # the name vLLM's and KServe's own examples give it
SHM_DIR = "/dev/shm"
COLORS = ("blue", "green")

# Probes. The startup probe gives a model server up to STARTUP_WINDOW_S to open its port before
# liveness (which would restart it) and readiness (which gates traffic) start probing.
READINESS_PERIOD_S = 2
READINESS_FAILURES = 3
LIVENESS_INITIAL_DELAY_S = 10
LIVENESS_PERIOD_S = 10
LIVENESS_FAILURES = 3
STARTUP_PERIOD_S = 5
STARTUP_WINDOW_S = 1200
PROGRESS_DEADLINE_S = 1800  # longer than the startup window, so a slow load is not a failed rollout

# Hardened defaults that still run root images such as vLLM's and TGI's (13e in the golden
# transcripts: no runAsNonRoot, which a root image fails with CreateContainerConfigError).
# Seccomp is set for the pod; escalation and capabilities exist only per container. A --patch
# overrides any of them (containers are merged by name, see _deep_merge).
POD_SECURITY: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}
CONTAINER_SECURITY: dict[str, Any] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}

# Keyed hash of the env Secret's content (see env_hash). The tier passes a per-user key; this
# default only serves --dry-run and tests.
DEFAULT_ENV_KEY = b"jupyter-tiers/env-hash/v1"

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


# --- rendering -------------------------------------------------------------------------------


def env_hash(env: Sequence[tuple[str, str]], key: bytes) -> str:
    """A keyed hash of the env Secret's content.

    It sits in the pod template so that a changed value rolls the pods. It is keyed (HMAC) because
    the Deployment is readable by people who may not read Secrets (the ``view`` role): an unkeyed
    hash of a short or guessable value could be confirmed by hashing guesses.
    """
    canonical = json.dumps(sorted(env), ensure_ascii=False, separators=(",", ":"))
    return hmac.new(key, canonical.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:16]


PORT_TOKEN = "{port}"


def shell_command(body: str, port: int) -> str:
    """A ``--shell`` body as the container runs it: ``{port}`` becomes the container port (the
    local tier puts each replica's own port there: the same meaning on both tiers)."""
    return body.replace(PORT_TOKEN, str(port))


def body_hash(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _default_pull_policy(image: str) -> str:
    """What the API server would choose, made explicit: Always for :latest or no tag."""
    last = image.split("@", 1)[0].rsplit("/", 1)[-1]
    if "@" in image:
        return "IfNotPresent"
    if ":" not in last or last.endswith(":latest"):
        return "Always"
    return "IfNotPresent"


def _metadata(name: str, namespace: str, labels: Mapping[str, str], notebook: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels)}
    if notebook:
        meta["annotations"] = {NOTEBOOK_ANNOTATION: notebook}
    return meta


def _model_volume(value: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """Profile's model volume -> (volume source entries, subPath)."""
    if not isinstance(value, Mapping):
        raise SpecError("model_volume", "must be a mapping with one of pvc, nfs or host_path")
    kinds = [k for k in ("pvc", "nfs", "host_path") if k in value]
    # path_map (where the training side's paths appear in the volume) is the handoff's (handoff.py).
    unknown = sorted(set(value) - {"pvc", "nfs", "host_path", "sub_path", "path_map"})
    if len(kinds) != 1 or unknown:
        raise SpecError(
            "model_volume",
            "give exactly one of pvc: NAME, nfs: {server, path} or host_path: PATH (and optionally "
            "sub_path, path_map)",
        )
    sub_path = value.get("sub_path")
    if sub_path is not None and (
        not isinstance(sub_path, str)
        or not sub_path
        or sub_path.startswith("/")
        or ".." in sub_path.split("/")
    ):
        raise SpecError("model_volume", f"sub_path {sub_path!r} must be a relative path inside the volume")
    kind = kinds[0]
    if kind == "pvc":
        claim = value["pvc"]
        if not isinstance(claim, str) or len(claim) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(claim):
            raise SpecError("model_volume", f"pvc {claim!r} is not a PersistentVolumeClaim name")
        return {"persistentVolumeClaim": {"claimName": claim, "readOnly": True}}, sub_path
    if kind == "nfs":
        nfs = value["nfs"]
        if (
            not isinstance(nfs, Mapping)
            or set(nfs) != {"server", "path"}
            or not isinstance(nfs["server"], str)
            or not nfs["server"]
            or not isinstance(nfs["path"], str)
            or not nfs["path"].startswith("/")
        ):
            raise SpecError("model_volume", "nfs needs server: HOST and path: /ABSOLUTE/PATH")
        return {"nfs": {"server": nfs["server"], "path": nfs["path"], "readOnly": True}}, sub_path
    path = value["host_path"]
    if not isinstance(path, str) or not path.startswith("/"):
        raise SpecError("model_volume", f"host_path {path!r} must be an absolute path")
    return {"hostPath": {"path": path, "type": "Directory"}}, sub_path



def _container(
    spec: ServeSpec, *, image: str, env_secret: str | None, has_models: bool, sub_path: str | None
) -> dict[str, Any]:
    script = "command.sh" if spec.shell else "main.py"
    command = ["/bin/sh", f"{CODE_DIR}/{script}"] if spec.shell else [spec.python, f"{CODE_DIR}/{script}"]
    names = {k for k, _ in spec.env} | {k for k, _ in spec.secret_env}
    env: list[dict[str, Any]] = [
        {"name": "JT_SERVICE_NAME", "value": spec.name},
        {"name": "JT_PORT", "value": str(spec.port)},
        {"name": "PORT", "value": str(spec.port)},  # as on the local tier
    ]
    if has_models:
        env.append({"name": "JT_MODEL_DIR", "value": MODEL_DIR})
    if spec.model_path is not None:
        env.append({"name": "JT_MODEL_PATH", "value": spec.model_path})
    if not spec.shell and "PYTHONUNBUFFERED" not in names:
        env.append({"name": "PYTHONUNBUFFERED", "value": "1"})  # so print() reaches the log at once
    for key, _ in spec.env:
        env.append({"name": key, "valueFrom": {"secretKeyRef": {"name": env_secret, "key": key}}})
    for key, ref in spec.secret_env:
        secret, _, item = ref.partition("/")
        env.append({"name": key, "valueFrom": {"secretKeyRef": {"name": secret, "key": item}}})

    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": image,
        "imagePullPolicy": spec.image_pull_policy or _default_pull_policy(image),
        "command": command,
        "ports": [{"name": PORT_NAME, "containerPort": spec.port, "protocol": "TCP"}],
        "env": env,
    }
    resources: dict[str, dict[str, str]] = {}
    amounts = {k: v for k, v in (("cpu", spec.cpu), ("memory", spec.memory)) if v is not None}
    if amounts:
        resources["requests"] = dict(amounts)
        resources["limits"] = dict(amounts)
    if spec.gpus:
        resources.setdefault("limits", {})["nvidia.com/gpu"] = str(spec.gpus)
    if resources:
        container["resources"] = resources

    def tcp() -> dict[str, Any]:
        return {"tcpSocket": {"port": PORT_NAME}}

    readiness: dict[str, Any] = (
        {"httpGet": {"path": spec.readiness, "port": PORT_NAME}} if spec.readiness is not None else tcp()
    )
    readiness.update(periodSeconds=READINESS_PERIOD_S, failureThreshold=READINESS_FAILURES)
    container["readinessProbe"] = readiness
    container["livenessProbe"] = {
        **tcp(),
        "initialDelaySeconds": LIVENESS_INITIAL_DELAY_S,
        "periodSeconds": LIVENESS_PERIOD_S,
        "failureThreshold": LIVENESS_FAILURES,
    }
    container["startupProbe"] = {
        **tcp(),
        "periodSeconds": STARTUP_PERIOD_S,
        "failureThreshold": STARTUP_WINDOW_S // STARTUP_PERIOD_S,
    }
    mounts: list[dict[str, Any]] = [{"name": "code", "mountPath": CODE_DIR, "readOnly": True}]
    if has_models:
        model_mount: dict[str, Any] = {"name": "models", "mountPath": MODEL_DIR, "readOnly": True}
        if sub_path:
            model_mount["subPath"] = sub_path
        mounts.append(model_mount)
    if shm_size_of(spec) is not None:
        mounts.append({"name": SHM_VOLUME, "mountPath": SHM_DIR})
    container["volumeMounts"] = mounts
    container["securityContext"] = copy.deepcopy(CONTAINER_SECURITY)
    return container


def _deep_merge(base: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``patch`` over ``base`` as a JSON merge patch: maps merge, lists and scalars replace,
    ``null`` removes the key. One exception, as in kubectl's strategic merge: a ``containers``
    list merges its entries by ``name`` (so ``[{"name": "server", "securityContext": {...}}]``
    changes only that), and entries with a new name are added."""
    out = dict(base)
    for key, val in patch.items():
        if val is None:
            out.pop(key, None)
        elif isinstance(val, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], val)
        elif key == "containers" and _named_list(val) and _named_list(out.get(key)):
            merged = {c["name"]: c for c in out[key]}
            for item in val:
                old = merged.get(item["name"])
                merged[item["name"]] = _deep_merge(old, item) if old is not None else copy.deepcopy(item)
            out[key] = list(merged.values())
        else:
            out[key] = copy.deepcopy(val)
    return out


def _named_list(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(v, dict) and isinstance(v.get("name"), str) for v in value)


def render_ingress(
    name: str,
    namespace: str,
    rules: Sequence[str],
    port: int,
    *,
    tls_secret: str | None = None,
    ingress_class: str | None = None,
    annotations: Mapping[str, Any] | None = None,
    notebook: str | None = None,
) -> dict[str, Any]:
    """The networking.k8s.io/v1 Ingress ``name`` routing every ``HOST[/PATH]`` of ``rules``
    (servespec.parse_ingress; pathType Prefix) to port ``port`` of the Service ``name``.

    Rules of one host share one ``rules`` entry, in the order given. ``tls_secret`` adds one
    ``tls`` entry for all the hosts; ``ingress_class`` sets ``spec.ingressClassName`` (else the
    cluster's default IngressClass decides); ``annotations`` (the controller's settings) go into
    ``metadata.annotations``. Raises ``SpecError`` for a bad value.
    """
    if not rules:
        raise SpecError("ingress", "give at least one HOST[/PATH]")
    paths: dict[str, list[str]] = {}
    for text in rules:
        host, path = parse_ingress(text)
        if path in paths.setdefault(host, []):
            raise SpecError("ingress", f"{text!r} is given twice")
        paths[host].append(path)
    meta = _metadata(name, namespace, {NAME_LABEL: name, MANAGED_BY_LABEL: MANAGER}, notebook)
    if annotations:
        meta["annotations"] = {**check_ingress_annotations(dict(annotations)), **meta.get("annotations", {})}
    backend = {"service": {"name": name, "port": {"number": port}}}
    spec: dict[str, Any] = {}
    if ingress_class is not None:
        spec["ingressClassName"] = check_ingress_class(ingress_class)
    if tls_secret is not None:
        if len(tls_secret) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(tls_secret):
            raise SpecError("tls_secret", f"{tls_secret!r} is not a Secret name")
        spec["tls"] = [{"hosts": list(paths), "secretName": tls_secret}]
    spec["rules"] = [
        {"host": host, "http": {"paths": [
            {"path": path, "pathType": "Prefix", "backend": copy.deepcopy(backend)} for path in host_paths]}}
        for host, host_paths in paths.items()
    ]
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta, "spec": spec}


def render_manifests(
    spec: ServeSpec,
    *,
    namespace: str,
    service_type: str = "ClusterIP",
    image_pull_secrets: Sequence[str] = (),
    model_volume: Mapping[str, Any] | None = None,
    color: str | None = None,
    notebook: str | None = None,
    env_key: bytes | None = None,
    ingress_class: str | None = None,
    ingress_annotations: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The objects of one service, in apply order: ConfigMap, Secret (only with env), Deployment,
    Service, Ingress (only with ingress), HorizontalPodAutoscaler (only with autoscale).

    ``namespace``, ``service_type`` (which the spec's own ``service_type`` overrides),
    ``image_pull_secrets``, ``model_volume``, ``ingress_class`` and ``ingress_annotations`` come
    from the profile; ``model_volume`` is ``{pvc: NAME}``, ``{nfs: {server, path}}`` or ``{host_path: PATH}``,
    each with an optional ``sub_path``, mounted read-only at /models. ``color`` (``blue`` or
    ``green``, for ``strategy="bluegreen"``; default blue) names the Deployment, its ConfigMap and
    Secret ``NAME-<color>…`` and points the Service's selector at that color: the tier applies the
    Service only once the new color is ready. ``env_key`` keys the env hash (see ``env_hash``);
    pass a per-user secret. Raises ``SpecError`` for a bad spec or profile value.
    """
    validate_serve_spec(spec)
    service_type = spec.service_type or service_type
    if not isinstance(namespace, str) or len(namespace) > 63 or not _DNS1123_LABEL.fullmatch(namespace):
        raise SpecError("namespace", f"{namespace!r} is not a namespace name (a lowercase DNS label)")
    if service_type not in SERVICE_TYPES:
        raise SpecError("service_type", f"{service_type!r} is not allowed; use {', '.join(SERVICE_TYPES)}")
    if isinstance(image_pull_secrets, str):
        raise SpecError("image_pull_secrets", "must be a list of Secret names")
    for secret in image_pull_secrets:
        if not isinstance(secret, str) or len(secret) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(secret):
            raise SpecError("image_pull_secrets", f"{secret!r} is not a Secret name")
    if spec.strategy == "bluegreen":
        color = color or COLORS[0]
        if color not in COLORS:
            raise SpecError("strategy", f"blue-green color {color!r} is not allowed; use blue or green")
    elif color is not None:
        raise SpecError("strategy", "a color is only used with strategy bluegreen")
    volume_source, sub_path = _model_volume(model_volume) if model_volume is not None else ({}, None)
    image = spec.image
    assert image is not None  # validate_serve_spec checked it

    name = spec.name
    base = f"{name}-{color}" if color else name
    labels = {NAME_LABEL: name, MANAGED_BY_LABEL: MANAGER}
    pod_labels = {**labels, COLOR_LABEL: color} if color else dict(labels)
    selector = {NAME_LABEL: name, COLOR_LABEL: color} if color else {NAME_LABEL: name}
    code_name, env_name = f"{base}-code", f"{base}-env"
    env = list(spec.env)

    objects: list[dict[str, Any]] = []
    script = "command.sh" if spec.shell else "main.py"
    objects.append({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(code_name, namespace, labels, notebook),
        "data": {script: shell_command(spec.body, spec.port) if spec.shell else spec.body},
    })
    if env:
        objects.append({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": _metadata(env_name, namespace, labels, notebook),
            "type": "Opaque",
            "data": {k: base64.b64encode(v.encode("utf-8", "surrogatepass")).decode("ascii") for k, v in env},
        })

    template_annotations = {BODY_HASH_ANNOTATION: body_hash(spec.body)}
    if env:
        template_annotations[ENV_HASH_ANNOTATION] = env_hash(env, env_key or DEFAULT_ENV_KEY)
    pod_spec: dict[str, Any] = {
        "containers": [
            _container(spec, image=image, env_secret=env_name if env else None,
                       has_models=model_volume is not None, sub_path=sub_path)
        ],
        # Service links would add NAME_PORT=tcp://... variables, which break programs reading
        # their own NAME_PORT (vLLM reads VLLM_PORT, for one).
        "enableServiceLinks": False,
        # A model server never talks to the API: no ServiceAccount token in the pod.
        "automountServiceAccountToken": False,
        "securityContext": copy.deepcopy(POD_SECURITY),
    }
    volumes: list[dict[str, Any]] = [{"name": "code", "configMap": {"name": code_name}}]
    if model_volume is not None:
        volumes.append({"name": "models", **volume_source})
    shm_size = shm_size_of(spec)
    if shm_size is not None:
        # The runtime gives a pod 64 MiB of /dev/shm; a model server's shared memory needs more.
        # A tmpfs of at most shm_size: what is written there counts against the pod's memory.
        volumes.append({"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": shm_size}})
    pod_spec["volumes"] = volumes
    if spec.node_selector:
        pod_spec["nodeSelector"] = dict(sorted(spec.node_selector))
    if spec.tolerations:
        pod_spec["tolerations"] = [_toleration(t) for t in spec.tolerations]
    if image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": s} for s in image_pull_secrets]

    deployment_spec: dict[str, Any] = {}
    if spec.autoscale is None:
        # With an autoscaler the HPA owns the replica count; applying one would fight it.
        deployment_spec["replicas"] = spec.replicas
    deployment_spec.update({
        "selector": {"matchLabels": selector},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        "progressDeadlineSeconds": PROGRESS_DEADLINE_S,
        "template": {
            "metadata": {"labels": pod_labels, "annotations": template_annotations},
            "spec": pod_spec,
        },
    })
    deployment_meta = _metadata(base, namespace, labels, notebook)
    if spec.model_source:
        deployment_meta.setdefault("annotations", {})[MODEL_FROM_ANNOTATION] = spec.model_source
    objects.append({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": deployment_meta,
        "spec": deployment_spec,
    })
    objects.append({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(name, namespace, labels, notebook),
        "spec": {
            "type": service_type,
            "selector": dict(selector),
            "ports": [{"name": PORT_NAME, "port": spec.port, "targetPort": PORT_NAME, "protocol": "TCP"}],
        },
    })
    if spec.ingress:
        objects.append(render_ingress(name, namespace, spec.ingress, spec.port, tls_secret=spec.tls_secret,
                                      ingress_class=ingress_class, annotations=ingress_annotations,
                                      notebook=notebook))
    if spec.autoscale is not None:
        low, high, cpu = spec.autoscale
        objects.append({
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": _metadata(name, namespace, labels, notebook),
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": base},
                "minReplicas": low,
                "maxReplicas": high,
                "metrics": [{
                    "type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": cpu}},
                }],
            },
        })

    patch = _parse_patch(spec.patch)
    out = []
    for obj in objects:
        if obj["kind"] in patch:
            merged = _deep_merge(obj, patch[obj["kind"]])
            _check_kept(obj, merged)
            obj = merged
        out.append(obj)
    return out


_MISSING = object()


def _at(obj: Any, path: Sequence[str]) -> Any:
    for step in path:
        if not isinstance(obj, dict) or step not in obj:
            return _MISSING
        obj = obj[step]
    return obj


def _kept_paths(kind: str) -> list[tuple[str, ...]]:
    """What a patch may not change: how the tier finds, lists and deletes the objects (names,
    namespace, our labels) and how they point at each other (selectors, the HPA's target)."""
    paths = [("apiVersion",), ("kind",), ("metadata", "name"), ("metadata", "namespace"),
             ("metadata", "labels", NAME_LABEL), ("metadata", "labels", MANAGED_BY_LABEL)]
    if kind == "Deployment":
        paths += [("spec", "selector")] + [("spec", "template", "metadata", "labels", label)
                                          for label in (NAME_LABEL, MANAGED_BY_LABEL, COLOR_LABEL)]
    elif kind == "Service":
        paths.append(("spec", "selector"))
    elif kind == "HorizontalPodAutoscaler":
        paths.append(("spec", "scaleTargetRef"))
    return paths


def _check_kept(original: Mapping[str, Any], merged: Mapping[str, Any]) -> None:
    kind = original["kind"]
    for path in _kept_paths(kind):
        if _at(original, path) != _at(merged, path):
            shown = ""
            for step in path:  # metadata.labels[app.kubernetes.io/name]
                shown += f"[{step}]" if "/" in step else ("." if shown else "") + step
            raise SpecError("patch", f"the {kind} patch may not change {shown} (jupyter-tiers manages it)")


# --- YAML ------------------------------------------------------------------------------------

class _Dumper(yaml.SafeDumper):
    """Block style for multi-line strings, so a cell body reads as written; never anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _represent_str)


def _secret_comment(secret: Mapping[str, Any]) -> str:
    """A Secret as YAML comment lines naming it and its keys, never a value."""
    meta = secret.get("metadata") if isinstance(secret.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    name, namespace = str(meta.get("name") or "?"), str(meta.get("namespace") or "?")
    keys: list[str] = []
    for field in ("data", "stringData"):
        if isinstance(secret.get(field), Mapping):
            keys += [str(k) for k in secret[field] if str(k) not in keys]
    if name.endswith("-sync"):  # k8s/sync_render.py: the notebook's files, one key each
        return (f"# Secret {name} (namespace {namespace}) is not shown: it holds the {len(keys)} files\n"
                "# --sync sends (a Secret: the view role cannot read it). The tier creates it when it\n"
                "# applies; to apply this YAML by hand, run the cell once or create it from the files.\n")
    shown = [k for k in keys if _CONFIG_KEY.fullmatch(k)]  # a patch's odd key could end the comment
    hidden = len(keys) - len(shown)
    listed = ", ".join(shown) + (f" (and {hidden} more)" if hidden else "")
    literals = " ".join(f"--from-literal={k}=..." for k in shown)
    return (
        f"# Secret {name} (namespace {namespace}) is not shown: it holds the --env values.\n"
        f"# Keys: {listed or 'none'}. The tier creates it when it applies; to apply this YAML\n"
        f"# by hand, create it first:\n"
        f"#   kubectl -n {namespace} create secret generic {name} {literals}\n"
    )


def render_yaml(objects: Sequence[Mapping[str, Any]]) -> str:
    """``---``-separated YAML of ``objects`` (what ``--dry-run`` prints and Copy YAML copies).

    Valid YAML that ``kubectl apply -f`` accepts as is, but never an env value: a Secret is
    shown as a comment block (its name, its keys and how to create it by hand) at the top of the
    next object's document.
    """
    docs = []
    comment = ""
    for obj in objects:
        if obj.get("kind") == "Secret":
            comment += _secret_comment(obj)
            continue
        docs.append(comment + yaml.dump(dict(obj), Dumper=_Dumper, sort_keys=False,
                                        default_flow_style=False, allow_unicode=True, width=1000))
        comment = ""
    if comment:
        docs.append(comment)
    return "---\n" + "---\n".join(docs)
