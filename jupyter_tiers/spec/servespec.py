"""Pure validation of a ServeSpec, the one definition every serving tier uses (Kubernetes renders
it into manifests, the local tier runs it in processes): :func:`validate_serve_spec` and the
``--autoscale`` parser. Field rules follow Kubernetes' own (names, quantities, labels), so a cell
that passes here also applies on a cluster.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from ..core.errors import SpecError
from ..core.model import PULL_POLICIES, SERVE_STRATEGIES, SERVICE_TYPES, ServeSpec

MAX_NAME = 50  # a DNS label is 63; "-green-code" needs 11 more
MAX_BODY_BYTES = 1_000_000  # a ConfigMap holds at most 1 MiB
MAX_ENV_BYTES = 1_000_000  # so does a Secret
RENDERED_KINDS = ("ConfigMap", "Secret", "Deployment", "Service", "HorizontalPodAutoscaler")

_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
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
# Ingress paths (pathType Prefix): RFC 3986 path characters; the API server's own checks follow.
_INGRESS_PATH = re.compile(r"/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*")
_INGRESS_PATH_BAD_PARTS = ("//", "/./", "/../", "%2f", "%2F")
_INGRESS_PATH_BAD_ENDS = ("/..", "/.")
_IPV4 = re.compile(r"[0-9]+(\.[0-9]+){3}")
MAX_INGRESS_RULES = 50
MAX_ANNOTATIONS_BYTES = 256 * 1024  # the API server's limit on all of an object's annotations
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


_MEMORY_UNITS = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60,
                 "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_MEMORY_RULE = ("a number with a unit: Ki Mi Gi Ti (powers of 1024) or k M G T (powers of 1000), "
                "e.g. 512Mi, 4Gi, 1G")


def memory_bytes(text: str) -> int | None:
    """A memory quantity as --memory takes it (``512Mi``, ``1.5Gi``, ``2G``) in bytes (rounded
    up); None when ``text`` is not one (a bare number, another unit, too long)."""
    if not isinstance(text, str) or len(text) > 40 or not _MEMORY.fullmatch(text):
        return None
    unit = text.lstrip("0123456789.")
    whole, _, frac = text[: len(text) - len(unit)].partition(".")
    scale = _MEMORY_UNITS[unit]
    return int(whole) * scale + -(-int(frac or "0") * scale // 10 ** len(frac))


def _validate_memory(value: object) -> None:
    if value is None:
        return
    memory = _text("memory", value)
    if not memory_bytes(memory):
        raise SpecError("memory", f"{memory!r} is not a memory quantity; use {_MEMORY_RULE}")


# /dev/shm of a serving pod (--shm-size): a memory-backed emptyDir. Container runtimes give a pod
# 64 MiB, too little for vLLM, TGI, PyTorch DataLoader workers and NCCL; what is written there
# counts against the pod's memory (limit), so the default is 1 GiB, or half of --memory below
# 2 GiB. "0" leaves the runtime's own /dev/shm.
SHM_DEFAULT_BYTES = 1 << 30
SHM_MIN_BYTES = 1 << 20
SHM_MAX_BYTES = 1 << 40  # 1 TiB: beyond any node's memory
_SHM_RULE = ("a memory quantity such as 1Gi, 512Mi or 2G (from 1Mi to 1Ti), or 0 for the container "
             "runtime's own /dev/shm (64 MiB)")


def parse_shm_size(value: object) -> str:
    """``--shm-size`` (or a profile's ``shm_size``) as the spec keeps it: ``"0"`` for the runtime's
    own /dev/shm, else the quantity as given (``1Gi``), checked against its bounds. Raises
    ``SpecError("shm_size", ...)`` naming what was wrong and what is allowed."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise SpecError("shm_size", f"expected {_SHM_RULE}, got {type(value).__name__}")
    text = str(value).strip()
    shown = repr(text) if len(text) <= 40 else repr(text[:40]) + "…"
    if text.strip("0") in ("", ".") and text:  # 0, 00, 0.0
        return "0"
    if text.isascii() and text.replace(".", "", 1).isdigit():
        raise SpecError("shm_size", f"{shown} has no unit; give one: {_SHM_RULE}")
    size = memory_bytes(text)
    if size is None:
        raise SpecError("shm_size", f"{shown} is not a size; use {_SHM_RULE}")
    if size == 0:
        return "0"
    if size < SHM_MIN_BYTES:
        raise SpecError("shm_size", f"{shown} is below 1Mi; use {_SHM_RULE}")
    if size > SHM_MAX_BYTES:
        raise SpecError("shm_size", f"{shown} is over 1Ti; use {_SHM_RULE}")
    return text


def _validate_shm_size(spec: ServeSpec) -> None:
    if spec.shm_size is None or parse_shm_size(spec.shm_size) == "0":
        return
    size, memory = memory_bytes(spec.shm_size), memory_bytes(spec.memory or "")
    if size and memory and size > memory:
        raise SpecError("shm_size", f"{spec.shm_size} is more than --memory {spec.memory}: what the pod "
                        "writes to /dev/shm counts against its memory; give a smaller --shm-size or "
                        "more --memory")


def shm_size_of(spec: ServeSpec) -> str | None:
    """The sizeLimit of a pod's /dev/shm volume: ``--shm-size`` as given, else the default (1Gi,
    or half of ``--memory`` when that is under 2 GiB); None for ``--shm-size 0`` (no volume:
    the runtime's own /dev/shm)."""
    if spec.shm_size is not None:
        size = parse_shm_size(spec.shm_size)
        return None if size == "0" else size
    memory = memory_bytes(spec.memory or "")
    if memory is None or memory >= 2 * SHM_DEFAULT_BYTES:
        return "1Gi"
    return f"{max(1, memory // 2 >> 20)}Mi"


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


def canary_replicas(total: int, percent: int) -> int:
    """How many of ``total`` replicas a ``percent`` canary gets: at least one, and at least one
    stays on the stable revision. Raises ``SpecError`` when no such split exists."""
    count = max(1, round(total * percent / 100))
    if total < 2 or count >= total:
        raise SpecError("canary", f"{percent} % of {total} replica{'s' if total != 1 else ''} leaves no "
                        "stable replica; a canary needs --replicas 2 or more and a share below 100 %")
    return count


def _validate_canary(spec: ServeSpec) -> None:
    _int_range("canary", spec.canary, 1, 99)
    if spec.strategy != "rolling":
        raise SpecError("canary", "a canary runs beside a rolling service; it cannot be combined with "
                        "--strategy bluegreen")
    if spec.autoscale is not None:
        raise SpecError("canary", "cannot split replicas that an autoscaler owns; drop --autoscale "
                        "while the canary runs")
    assert spec.canary is not None
    canary_replicas(spec.replicas, spec.canary)


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


_HOST_RULE = ("a lowercase DNS name such as models.lab.example (letters a-z, digits, '-' and '.', "
              "at most 253 characters) or a wildcard such as *.lab.example")


def parse_ingress(text: object) -> tuple[str, str]:
    """``"HOST[/PATH]"`` -> ``(host, path)``, an Ingress rule with pathType Prefix; the path
    defaults to ``/``.

    Follows the API server's rules (networking.k8s.io/v1): the host is a lowercase DNS-1123
    subdomain, optionally ``*.`` + one (a wildcard matches exactly one label), never an IP
    address or a port; the path is absolute and has no ``//``, ``/./``, ``/../`` or ``%2F`` and
    does not end in ``/.`` or ``/..``. Raises ``SpecError("ingress", ...)`` naming what is allowed.
    """
    usage = "expected HOST[/PATH], e.g. models.lab.example/llama"
    if not isinstance(text, str) or not text:
        raise SpecError("ingress", f"{usage}, got {text!r}")
    shown = repr(text) if len(text) <= 80 else repr(text[:80]) + "…"
    if "://" in text:
        raise SpecError("ingress", f"{shown}: give the host and path without a scheme ({usage}); "
                        "TLS comes from --tls-secret")
    slash = text.find("/")
    host, path = (text, "/") if slash < 0 else (text[:slash], text[slash:])
    if not host:
        raise SpecError("ingress", f"{shown}: the host is missing; {usage}")
    name = host[2:] if host.startswith("*.") else host
    if ":" in host:
        raise SpecError("ingress", f"{shown}: an Ingress host takes no port (the controller listens on "
                        "80 and 443); " + usage)
    if len(host) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(name) or any(
            len(label) > 63 for label in name.split(".")):
        raise SpecError("ingress", f"{shown}: the host must be {_HOST_RULE}")
    if _IPV4.fullmatch(host):
        raise SpecError("ingress", f"{shown}: the host must be a DNS name, not an IP address")
    if len(path) > 2048 or not _INGRESS_PATH.fullmatch(path):
        raise SpecError("ingress", f"{shown}: the path must start with '/' and hold only letters, digits "
                        "and - . _ ~ ! $ & ' ( ) * + , ; = : @ % /")
    for part in _INGRESS_PATH_BAD_PARTS:
        if part in path:
            raise SpecError("ingress", f"{shown}: the path must not contain {part!r}")
    for end in _INGRESS_PATH_BAD_ENDS:
        if path.endswith(end):
            raise SpecError("ingress", f"{shown}: the path must not end with {end!r}")
    return host, path


def check_ingress_class(value: object) -> str:
    """The profile's ``ingress_class``: an IngressClass name (a DNS-1123 subdomain)."""
    if not isinstance(value, str) or len(value) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(value):
        raise SpecError("ingress_class", f"{value!r} is not an IngressClass name; use a lowercase DNS name "
                        "such as nginx or traefik")
    return value


def snippet_annotation(key: str) -> bool:
    """Whether annotation ``key`` hands the ingress controller configuration text of its own
    (ingress-nginx's configuration-snippet, server-snippet, auth-snippet, modsecurity-snippet,
    stream-snippet, ...): it configures the controller for every site, so it is refused from any
    file unless the user opted in (config.load_config)."""
    return "snippet" in key.rpartition("/")[2].lower()


def check_ingress_annotations(value: object) -> dict[str, str]:
    """The profile's ``ingress_annotations``: annotation keys (``[prefix/]name``) to text (a YAML
    number or true/false becomes its text, as Kubernetes wants strings). Snippet annotations
    (:func:`snippet_annotation`) are refused by config.load_config, which knows the opt-in."""
    if not isinstance(value, dict):
        raise SpecError("ingress_annotations", "must be a mapping of annotation key to value, e.g. "
                        "nginx.ingress.kubernetes.io/proxy-body-size: 64m")
    out: dict[str, str] = {}
    for key, val in value.items():
        if not isinstance(key, str) or not _label_key_ok(key):
            raise SpecError("ingress_annotations", f"{key!r} is not an annotation key; expected "
                            "[prefix/]name, name up to 63 letters, digits, '-', '_' or '.', "
                            "prefix a DNS name")
        if isinstance(val, bool):
            val = "true" if val else "false"
        elif isinstance(val, (int, float)):
            val = str(val)
        if not isinstance(val, str):
            raise SpecError("ingress_annotations", f"{key}: the value must be text, got {type(val).__name__}")
        out[key] = val
    size = sum(len(k) + len(v.encode("utf-8", "surrogatepass")) for k, v in out.items())
    if size > MAX_ANNOTATIONS_BYTES:
        raise SpecError("ingress_annotations",
                        f"{size} bytes; annotations hold at most {MAX_ANNOTATIONS_BYTES}")
    return out


def _validate_ingress(spec: ServeSpec) -> None:
    if not isinstance(spec.ingress, (tuple, list)):
        raise SpecError("ingress", f"must be a list of HOST[/PATH], got {type(spec.ingress).__name__}")
    if len(spec.ingress) > MAX_INGRESS_RULES:
        raise SpecError("ingress", f"{len(spec.ingress)} rules; at most {MAX_INGRESS_RULES}")
    seen: set[tuple[str, str]] = set()
    for text in spec.ingress:
        rule = parse_ingress(text)
        if rule in seen:
            raise SpecError("ingress", f"{text!r} is given twice")
        seen.add(rule)
    if spec.tls_secret is not None:
        secret = _text("tls_secret", spec.tls_secret)
        if len(secret) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(secret):
            raise SpecError("tls_secret", f"{secret!r} is not a Secret name; use lowercase letters, digits, "
                            "'-' and '.' (a kubernetes.io/tls Secret in the service's namespace)")
        if not spec.ingress:
            raise SpecError("tls_secret",
                            "needs --ingress HOST[/PATH]: the Secret secures the Ingress's hosts")
    if spec.service_type is not None and spec.service_type not in SERVICE_TYPES:
        raise SpecError("service_type",
                        f"{spec.service_type!r} is not allowed; use {', '.join(SERVICE_TYPES)}")


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
    _validate_shm_size(spec)
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
    if spec.canary is not None:
        _validate_canary(spec)
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
    _validate_ingress(spec)


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
