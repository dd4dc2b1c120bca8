"""Pure rendering of a ServeSpec into the Kubernetes objects of one service.

Nothing here does I/O or imports the ``kubernetes`` client. :func:`render_manifests` returns plain
dicts in apply order; the tier applies them with server-side apply under one field manager, so an
identical re-run renders byte-identical objects and changes nothing on the cluster, while a changed
body or env rolls the pods (their hashes sit in the pod template's annotations).

Objects (``NAME`` is the service name; with blue-green, ``D`` is ``NAME-<color>``, else ``NAME``):

- ConfigMap ``D-code``: the cell body under ``main.py`` (Python) or ``command.sh`` (shell, with
  ``{port}`` replaced by the container port, as the local tier replaces it by the replica's);
- Secret ``D-env`` (only when there is env): the env values, base64 in ``data``;
- Deployment ``D``: one container ``server`` running the body from ``/jt/code``;
- Service ``NAME``: port ``spec.port`` -> the container port named ``http``;
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

from ..errors import SpecError
from ..model import PULL_POLICIES, SERVE_STRATEGIES, SERVICE_TYPES, ServeSpec

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
COLORS = ("blue", "green")
MAX_NAME = 50  # a DNS label is 63; "-green-code" needs 11 more
MAX_BODY_BYTES = 1_000_000  # a ConfigMap holds at most 1 MiB
MAX_ENV_BYTES = 1_000_000  # so does a Secret
RENDERED_KINDS = ("ConfigMap", "Secret", "Deployment", "Service", "HorizontalPodAutoscaler")

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

_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_CPU = re.compile(r"(?:[0-9]+m|[0-9]+(?:\.[0-9]{1,3})?)")
_MEMORY = re.compile(r"[0-9]+(?:\.[0-9]+)?(?:Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)")
_PYTHON = re.compile(r"[A-Za-z0-9_./+~][A-Za-z0-9_./+~-]*")
_HTTP_PATH = re.compile(r"/[\x21-\x7e]*")  # printable ASCII, no space
_MODEL_PATH = re.compile(r"/[A-Za-z0-9_./+@=,:-]*")
_MODEL_SOURCE = re.compile(r"[A-Za-z0-9_./+@=,:() -]+")
_AUTOSCALE = re.compile(r"([0-9]{1,9}):([0-9]{1,9})(?::([0-9]{1,9})%?)?")
# Image references, after the distribution/reference grammar: [domain[:port]/]path[:tag][@digest].
_IMG_HOST = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_IMG_DOMAIN = rf"{_IMG_HOST}(?:\.{_IMG_HOST})*(?::[0-9]+)?"
_IMG_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE = re.compile(
    rf"(?:{_IMG_DOMAIN}/)?{_IMG_COMPONENT}(?:/{_IMG_COMPONENT})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?"
)
# Names every serving replica gets from jupyter-tiers or Kubernetes, on both tiers (a cell works on
# either): the port it must listen on (PORT, JT_PORT), JT_* and the in-cluster API's address. Not
# PATH, HOME, LD_LIBRARY_PATH...: serving runs no script of ours that needs them, and a container
# image may legitimately need them changed.
_RESERVED_ENV_PREFIXES = ("JT_", "KUBERNETES_")
_RESERVED_ENV_NAMES = ("PORT",)
_TOLERATION_KEYS = ("key", "operator", "value", "effect", "tolerationSeconds")
_TOLERATION_OPERATORS = ("Equal", "Exists")
_TOLERATION_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_PATCH_FORBIDDEN = (("apiVersion",), ("kind",), ("metadata", "name"), ("metadata", "namespace"))

_NAME_RULE = (
    f"lowercase letters, digits and '-', starting with a letter, ending with a letter or digit, "
    f"at most {MAX_NAME} characters (the rendered objects add suffixes such as -green-code)"
)


# --- validation ------------------------------------------------------------------------------


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_range(field: str, value: object, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise SpecError(field, f"must be a whole number from {low} to {high}, got {value!r}")
    return value


def _text(field: str, value: object, what: str = "text") -> str:
    if not isinstance(value, str):
        raise SpecError(field, f"must be {what}, got {type(value).__name__}")
    return value


def _pairs(field: str, value: object) -> list[tuple[str, str]]:
    """A tuple of (str, str) pairs, as the spec carries maps."""
    if not isinstance(value, (tuple, list)):
        raise SpecError(field, f"must be a list of NAME=VALUE pairs, got {type(value).__name__}")
    out: list[tuple[str, str]] = []
    for n, item in enumerate(value, 1):
        if (
            not isinstance(item, (tuple, list))
            or len(item) != 2
            or not isinstance(item[0], str)
            or not isinstance(item[1], str)
        ):
            shown = f"entry {n}" if field == "env" else repr(item)  # an env value may be a secret
            raise SpecError(field, f"each entry must be a NAME=VALUE pair of text, got {shown}")
        out.append((item[0], item[1]))
    return out


def _validate_name(value: object) -> str:
    name = _text("name", value)
    if len(name) > MAX_NAME or not _DNS1035_LABEL.fullmatch(name):
        raise SpecError("name", f"{name!r} is not allowed; use {_NAME_RULE}")
    return name


def _validate_image(value: object) -> str:
    if value is None:
        raise SpecError(
            "image", "an image is required (e.g. vllm/vllm-openai:v0.6.0); set it or the profile's image"
        )
    image = _text("image", value)
    if len(image) > 255 or not _IMAGE.fullmatch(image):
        raise SpecError(
            "image",
            f"{image!r} is not an image reference; expected [registry[:port]/]path[:tag][@sha256:digest] "
            "with a lowercase path, e.g. vllm/vllm-openai:v0.6.0",
        )
    return image


def _validate_cpu(value: object) -> None:
    if value is None:
        return
    cpu = _text("cpu", value)
    if not _CPU.fullmatch(cpu) or not _cpu_millis(cpu):
        raise SpecError("cpu", f"{cpu!r} is not a CPU quantity; use cores or millicores, e.g. 500m, 2, 1.5")


def _cpu_millis(cpu: str) -> int:
    if cpu.endswith("m"):
        return int(cpu[:-1])
    whole, _, frac = cpu.partition(".")
    return int(whole) * 1000 + int((frac + "000")[:3])


def _validate_memory(value: object) -> None:
    if value is None:
        return
    memory = _text("memory", value)
    if not _MEMORY.fullmatch(memory) or not any(c not in "0." for c in memory.rstrip("KMGTPEik")):
        raise SpecError(
            "memory",
            f"{memory!r} is not a memory quantity; use a number with a unit: Ki Mi Gi Ti (powers of 1024) "
            "or k M G T (powers of 1000), e.g. 512Mi, 4Gi, 1G",
        )


def _validate_env_name(field: str, key: str) -> None:
    if not _ENV_KEY.fullmatch(key):
        raise SpecError(
            field, f"{key!r} is not a variable name; use letters, digits and '_', not starting with a digit"
        )
    for prefix in _RESERVED_ENV_PREFIXES:
        if key.startswith(prefix):
            raise SpecError(field, f"{key!r} is reserved ({prefix}* is set by jupyter-tiers or Kubernetes)")
    if key in _RESERVED_ENV_NAMES:
        raise SpecError(field, f"{key!r} is reserved (every replica gets its port in PORT and JT_PORT; "
                        "read it instead of setting it)")


def _validate_env(spec: ServeSpec) -> None:
    seen: set[str] = set()
    size = 0
    for key, val in _pairs("env", spec.env):
        _validate_env_name("env", key)
        if key in seen:
            raise SpecError("env", f"{key!r} is given twice")
        seen.add(key)
        size += len(key) + len(val.encode("utf-8", "surrogatepass"))
    if size > MAX_ENV_BYTES:
        raise SpecError("env", f"the values add up to {size} bytes; a Secret holds at most {MAX_ENV_BYTES}")
    for key, ref in _pairs("secret_env", spec.secret_env):
        _validate_env_name("secret_env", key)
        if key in seen:
            raise SpecError("secret_env", f"{key!r} is also given in env (or twice)")
        seen.add(key)
        secret, slash, item = ref.partition("/")
        if (
            not slash
            or len(secret) > 253
            or not _DNS1123_SUBDOMAIN.fullmatch(secret)
            or len(item) > 253
            or not _CONFIG_KEY.fullmatch(item)
        ):
            raise SpecError(
                "secret_env",
                f"{key}={ref!r}: expected SECRET/KEY, a Secret name (lowercase letters, digits, '-' and '.') "
                "and a key (letters, digits, '-', '_' and '.'), e.g. hf-token/token",
            )


def _validate_label_pairs(field: str, pairs: Sequence[tuple[str, str]]) -> None:
    if len({key for key, _ in pairs}) != len(pairs):
        raise SpecError(field, "a key is given twice")
    for key, val in pairs:
        if not _label_key_ok(key):
            raise SpecError(
                field,
                f"{key!r} is not a label key; expected [prefix/]name, name up to 63 letters, digits, "
                "'-', '_' or '.' (alphanumeric at both ends), prefix a DNS subdomain",
            )
        if val and (len(val) > 63 or not _LABEL_NAME.fullmatch(val)):
            raise SpecError(
                field,
                f"{key}={val!r}: a label value is empty or up to 63 letters, digits, '-', '_' or '.', "
                "alphanumeric at both ends",
            )


def _label_key_ok(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_LABEL_NAME.fullmatch(name))


def _toleration(value: object) -> dict[str, Any]:
    pairs = _pairs("tolerations", value)
    fields = dict(pairs)
    if len(fields) != len(pairs):
        raise SpecError("tolerations", f"a field is given twice in {pairs!r}")
    unknown = sorted(set(fields) - set(_TOLERATION_KEYS))
    if unknown:
        allowed = ", ".join(_TOLERATION_KEYS)
        raise SpecError("tolerations", f"unknown field {unknown[0]!r}; allowed: {allowed}")
    operator = fields.get("operator", "Equal")
    if operator not in _TOLERATION_OPERATORS:
        raise SpecError("tolerations", f"operator {operator!r} is not allowed; use Equal or Exists")
    key = fields.get("key", "")
    if key and not _label_key_ok(key):
        raise SpecError("tolerations", f"key {key!r} is not a label key")
    if not key and operator != "Exists":
        raise SpecError("tolerations", "a toleration without a key must use operator Exists")
    val = fields.get("value", "")
    if operator == "Exists" and val:
        raise SpecError("tolerations", "operator Exists takes no value")
    if val and (len(val) > 63 or not _LABEL_NAME.fullmatch(val)):
        raise SpecError("tolerations", f"value {val!r} is not a label value")
    effect = fields.get("effect", "")
    if effect and effect not in _TOLERATION_EFFECTS:
        allowed = ", ".join(_TOLERATION_EFFECTS)
        raise SpecError("tolerations", f"effect {effect!r} is not allowed; use {allowed}")
    out: dict[str, Any] = {}
    if key:
        out["key"] = key
    out["operator"] = operator
    if val:
        out["value"] = val
    if effect:
        out["effect"] = effect
    if "tolerationSeconds" in fields:
        seconds = fields["tolerationSeconds"]
        if not seconds.isascii() or not seconds.isdigit() or len(seconds) > 9:
            raise SpecError("tolerations", f"tolerationSeconds {seconds!r} must be a whole number of seconds")
        if effect != "NoExecute":
            raise SpecError("tolerations", "tolerationSeconds needs effect NoExecute")
        out["tolerationSeconds"] = int(seconds)
    return out


def _validate_autoscale(value: object) -> tuple[int, int, int] | None:
    if value is None:
        return None
    if not isinstance(value, (tuple, list)) or len(value) != 3 or not all(_is_int(v) for v in value):
        raise SpecError("autoscale", f"must be (min, max, cpu_percent), got {value!r}")
    low, high, cpu = value
    if not 1 <= low <= 1000:
        raise SpecError("autoscale", f"min must be from 1 to 1000, got {low}")
    if not low <= high <= 1000:
        raise SpecError("autoscale", f"max must be from min ({low}) to 1000, got {high}")
    if not 1 <= cpu <= 100:
        raise SpecError("autoscale", f"the CPU target must be from 1 to 100 percent, got {cpu}")
    return (low, high, cpu)


def parse_autoscale(text: str) -> tuple[int, int, int]:
    """``"MIN:MAX[:CPU%]"`` -> ``(min, max, cpu_percent)``; the CPU target defaults to 80 percent.

    Raises ``SpecError("autoscale", ...)`` for anything else.
    """
    usage = "expected MIN:MAX or MIN:MAX:CPU% (e.g. 1:4 or 2:8:70)"
    if not isinstance(text, str):
        raise SpecError("autoscale", f"{usage}, got {text!r}")
    match = _AUTOSCALE.fullmatch(text.strip(" "))
    if not match:
        raise SpecError("autoscale", f"{usage}, got {text!r}")
    low, high = int(match.group(1)), int(match.group(2))
    cpu = int(match.group(3)) if match.group(3) is not None else 80
    result = _validate_autoscale((low, high, cpu))
    assert result is not None
    return result


def _parse_patch(value: object) -> dict[str, dict[str, Any]]:
    if value is None:
        return {}
    text = _text("patch", value, "JSON text")
    try:
        patch = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise SpecError("patch", f"is not valid JSON: {exc}") from None
    if not isinstance(patch, dict):
        raise SpecError("patch", 'must be a JSON object keyed by kind, e.g. {"Deployment": {"spec": {...}}}')
    for kind, part in patch.items():
        if kind not in RENDERED_KINDS:
            raise SpecError("patch", f"unknown kind {kind!r}; allowed: {', '.join(RENDERED_KINDS)}")
        if not isinstance(part, dict):
            raise SpecError("patch", f"the {kind} patch must be a JSON object")
        for path in _PATCH_FORBIDDEN:
            node: Any = part
            for step in path[:-1]:
                node = node.get(step) if isinstance(node, dict) else None
            if isinstance(node, dict) and path[-1] in node:
                raise SpecError("patch", f"the {kind} patch may not change {'.'.join(path)}")
    return patch


def validate_serve_spec(spec: ServeSpec) -> None:
    """Check every field of ``spec``; raise ``SpecError(field, problem)`` for the first bad one.

    The problem text says what is allowed, so the magic can show it next to the option.
    """
    if not isinstance(spec, ServeSpec):
        raise SpecError("spec", f"expected a ServeSpec, got {type(spec).__name__}")
    body = _text("body", spec.body)
    if not body.strip():
        raise SpecError(
            "body", "the cell is empty; it should hold the program (or, with shell, the command) to serve"
        )
    if len(body.encode("utf-8", "surrogatepass")) > MAX_BODY_BYTES:
        raise SpecError("body", f"the cell is larger than {MAX_BODY_BYTES} bytes, a ConfigMap's limit")
    _validate_name(spec.name)
    _validate_image(spec.image)
    _int_range("replicas", spec.replicas, 0, 1000)
    _int_range("gpus", spec.gpus, 0, 64)
    _validate_cpu(spec.cpu)
    _validate_memory(spec.memory)
    _int_range("port", spec.port, 1, 65535)
    _validate_env(spec)
    if spec.readiness is not None:
        path = _text("readiness", spec.readiness)
        if len(path) > 2048 or not _HTTP_PATH.fullmatch(path):
            raise SpecError(
                "readiness", f"{path!r} must be an HTTP path starting with '/', without spaces, e.g. /health"
            )
    _validate_autoscale(spec.autoscale)
    if spec.autoscale is not None and spec.cpu is None:
        raise SpecError("autoscale", "needs a CPU request (set cpu): utilization is measured against it")
    if spec.strategy not in SERVE_STRATEGIES:
        raise SpecError("strategy", f"{spec.strategy!r} is not allowed; use {' or '.join(SERVE_STRATEGIES)}")
    if not isinstance(spec.shell, bool):
        raise SpecError("shell", f"must be true or false, got {spec.shell!r}")
    python = _text("python", spec.python)
    if len(python) > 255 or not _PYTHON.fullmatch(python):
        raise SpecError(
            "python",
            f"{python!r} is not allowed; use an interpreter name or path (python3, /opt/venv/bin/python)",
        )
    if spec.image_pull_policy is not None and spec.image_pull_policy not in PULL_POLICIES:
        allowed = ", ".join(PULL_POLICIES)
        raise SpecError("image_pull_policy", f"{spec.image_pull_policy!r} is not allowed; use {allowed}")
    _validate_label_pairs("node_selector", _pairs("node_selector", spec.node_selector))
    if not isinstance(spec.tolerations, (tuple, list)):
        kind = type(spec.tolerations).__name__
        raise SpecError("tolerations", f"must be a list of tolerations, got {kind}")
    for toleration in spec.tolerations:
        _toleration(toleration)
    patch = _parse_patch(spec.patch)
    if "HorizontalPodAutoscaler" in patch and spec.autoscale is None:
        raise SpecError("patch", "there is no HorizontalPodAutoscaler to patch (set autoscale)")
    if "Secret" in patch and not spec.env:
        raise SpecError("patch", "there is no Secret to patch (it exists only with env)")
    _validate_model(spec)


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


def _validate_model(spec: ServeSpec) -> None:
    """``model_path`` (from --model-from) is an absolute path in plain characters.

    Whether the profile has a model volume at all is the handoff's check (handoff.py), which
    refuses with the job's name before a spec is built."""
    if spec.model_source is not None and (
        not isinstance(spec.model_source, str) or len(spec.model_source) > 300
        or not _MODEL_SOURCE.fullmatch(spec.model_source)
    ):
        raise SpecError("model_source", f"{spec.model_source!r} is not profile/job_id (name)")
    if spec.model_path is None:
        return
    path = _text("model_path", spec.model_path)
    if len(path) > 4096 or not _MODEL_PATH.fullmatch(path) or ".." in path.split("/"):
        raise SpecError("model_path", f"{path!r} must be an absolute path of letters, digits and "
                        "_ . / + @ = , : - (on Kubernetes, under the model volume's mount, /models)")


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
) -> list[dict[str, Any]]:
    """The objects of one service, in apply order: ConfigMap, Secret (only with env), Deployment,
    Service, HorizontalPodAutoscaler (only with autoscale).

    ``namespace``, ``service_type``, ``image_pull_secrets`` and ``model_volume`` come from the
    profile; ``model_volume`` is ``{pvc: NAME}``, ``{nfs: {server, path}}`` or ``{host_path: PATH}``,
    each with an optional ``sub_path``, mounted read-only at /models. ``color`` (``blue`` or
    ``green``, for ``strategy="bluegreen"``; default blue) names the Deployment, its ConfigMap and
    Secret ``NAME-<color>…`` and points the Service's selector at that color: the tier applies the
    Service only once the new color is ready. ``env_key`` keys the env hash (see ``env_hash``);
    pass a per-user secret. Raises ``SpecError`` for a bad spec or profile value.
    """
    validate_serve_spec(spec)
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
