"""Profiles: layered YAML files describing where and how jobs run.

Layers, lowest precedence first: ``/etc/jupyter/tiers.yaml`` (a lab's admins), ``~/.jupyter/tiers.yaml``
(the user), then the project file: ``$JUPYTER_TIERS_CONFIG`` if set, else ``./tiers.yaml`` (shipped
next to shared notebook templates). Magic arguments override all of them. A later layer overrides a
profile key by key (``defaults`` and ``env`` are merged key by key too).

Trust: the admin and user layers, and a file named by ``$JUPYTER_TIERS_CONFIG`` (the user's own
choice), are trusted. A ``./tiers.yaml`` that merely sits in the working directory may have come
with a cloned repository, so it may set only what the allowlist :data:`PROJECT_KEYS`
(project_trust.py) names: choices among the trusted cluster's own resources, on a profile a
trusted layer defines and on one it defines itself; never code, destinations, exposure or
credentials, never an environment name that is not a tuning knob of :data:`PROJECT_ENV`, never
a Kubernetes profile of its own (it would use your kubeconfig) and never its own profile as the
default, unless the user opts in with ``trust_project_config: true`` in a trusted layer or
``JUPYTER_TIERS_TRUST_PROJECT=1``.
Everything such a file tried is refused at once, one line per key (:class:`ProjectFileRefused`).

Every problem is a :class:`ConfigError` naming the file, the key and what is allowed.
"""

from __future__ import annotations

import math
import os
import re
import shutil
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError, SpecError
from ..core.model import SERVICE_TYPES
from ..core.profile import Profile as Profile  # defined below the config layer, used with it
from ..core.sshnames import valid_host, valid_user
from ..data.handoff import parse_path_map
from ..data.objectstore import parse_object_store
from ..serving.loadplan import MAX_LIMIT_RPS
from ..spec.jobspec import parse_sbatch_option
from ..spec.options import JOB_OPTIONS, SERVE_OPTIONS, profile_keys
from ..spec.servespec import check_ingress_annotations, check_ingress_class, snippet_annotation
from .cache import load_file_cached
from .project_trust import PROJECT_ENV as PROJECT_ENV
from .project_trust import PROJECT_KEYS as PROJECT_KEYS
from .project_trust import project_env_allowed, refused_env_decides, rule, slurm_env_name
from .safe_yaml import parse_yaml

__all__ = ["Config", "ConfigError", "Profile", "ProjectFileRefused", "load_config"]

TIERS = ("slurm", "local", "kubernetes")
TIER_ALIASES = {"k8s": "kubernetes"}
ENV_VAR = "JUPYTER_TIERS_CONFIG"
TRUST_ENV_VAR = "JUPYTER_TIERS_TRUST_PROJECT"
TRUST_KEY = "trust_project_config"
SYSTEM_PATH = Path("/etc/jupyter/tiers.yaml")
USER_PATH = Path("~/.jupyter/tiers.yaml")
PROJECT_NAME = "tiers.yaml"
BUILTIN_LOCAL = "local"
#: The built-in profile of "this cluster" where ``sbatch`` is on PATH (Jupyter on the cluster:
#: Open OnDemand, JupyterHub): a slurm profile without ``host``, so a template's
#: ``--profile cluster`` works there with no tiers.yaml. A file's ``cluster`` profile adds to it.
BUILTIN_CLUSTER = "cluster"
#: Keys of a slurm profile that only mean something over SSH (with ``host``).
SSH_ONLY_KEYS = ("port", "user", "identity_file", "known_hosts", "proxy_jump", "ssh_config",
                 "connect_timeout")
#: Profiles jupyter-tiers defines itself, as a trusted layer would: a project file may change them
#: only as the allowlist allows, and cannot shadow them with a profile of its own.
BUILTIN_PROFILES: Mapping[str, Mapping[str, Any]] = {BUILTIN_LOCAL: {"tier": "local"}}

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_ENV_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_JUMP_RE = re.compile(r"[A-Za-z0-9_.:%@/\[\]][A-Za-z0-9_.:%@/\[\]-]{0,299}")  # [user@]host[:port], ssh://


# What a project ./tiers.yaml may set is one declared table, the allowlist (project_trust.py):
# PROJECT_KEYS, and the environment names it may set (PROJECT_ENV).


# Lower and upper bounds (seconds) of the profile's intervals and timeouts.
_SECONDS_BOUNDS = {
    "connect_timeout": (1.0, 600.0),
    "status_interval": (1.0, 3600.0),
    "rank_interval": (0.2, 3600.0),
    "request_timeout": (1.0, 3600.0),
    "stale_after": (10.0, 7 * 86400.0),  # reachability.py: a state older than this shows UNKNOWN
    "hang_after": (60.0, 7 * 86400.0),  # batch/hang.py: quiet this long, a running job looks hung
}
# Limits that keep a hostile YAML file (alias bombs, deep nesting) from exhausting the kernel.
MAX_CONFIG_BYTES = 4 * 1024 * 1024

# Keys of ``defaults``: the spec options a profile may preset (options.py; dashes accepted for
# underscores). Training tiers take job options, the Kubernetes tier serve options.
#: Serving options a ``tier: local`` profile's ``defaults`` may set beside the training ones (a
#: local profile serves too): those that mean something on this machine. ``python`` is shared.
#: The cluster-only ones (image, gpus, cpu, ...) are refused there rather than ignored.
LOCAL_SERVE_DEFAULTS = ("replicas", "port", "readiness")


def default_keys(tier: str | None) -> dict[str, type | tuple[type, ...]]:
    """The keys a profile of ``tier`` may set in ``defaults`` (every tier's when unknown)."""
    job, serve = profile_keys(JOB_OPTIONS), profile_keys(SERVE_OPTIONS)
    if tier == "local":
        return {**job, **{k: serve[k] for k in LOCAL_SERVE_DEFAULTS}}
    if tier == "slurm":
        return job
    if tier == "kubernetes":
        return serve
    return {**job, **serve}


_COMMON_KEYS: dict[str, type | tuple[type, ...]] = {
    "tier": str,
    "description": str,
    "workdir": str,
    "setup": list,
    "env": dict,
    "defaults": dict,
    # object_store: where the profile's jobs or pods reach S3 (objectstore.parse_object_store).
    "object_store": dict,
    "sync_max_mb": (int, float),  # --sync's size cap (sync.py)
}
TIER_KEYS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "slurm": {
        **_COMMON_KEYS,
        "host": str,
        "port": int,
        "user": str,
        "identity_file": str,
        "known_hosts": str,
        "proxy_jump": str,
        "ssh_config": str,
        "connect_timeout": (int, float),
        "status_interval": (int, float),
        "rank_interval": (int, float),
        "stale_after": (int, float),
        "hang_after": (int, float),
    },
    # path_map: where another profile's (a cluster's) checkpoint paths are mounted on this
    # machine, for %%k8s_serve --model-from on the local tier (handoff.py).
    "local": {**_COMMON_KEYS, "path_map": dict, "load_limit_rps": (int, float), "hang_after": (int, float)},
    "kubernetes": {
        **_COMMON_KEYS,
        "context": str,
        "kubeconfig": str,
        "namespace": str,
        "service_type": str,
        "ingress_class": str,  # the IngressClass of --ingress's Ingress (spec.ingressClassName)
        "ingress_annotations": dict,  # its metadata.annotations: the controller's settings
        "image_pull_secrets": list,
        "storage_class": str,
        "model_volume": dict,
        "fetch_image": str,  # the init container that fetches a model from the object store
        "request_timeout": (int, float),
        "load_limit_rps": (int, float),  # the most Service.load_test may send a second (loadplan.py)
        "stale_after": (int, float),
    },
}


@dataclass(frozen=True)
class Config:
    """All profiles from every layer, plus the name of the default profile."""

    profiles: Mapping[str, Profile]
    default_profile: str
    sources: tuple[str, ...] = ()

    def profile(self, name: str | None = None) -> Profile:
        """The named profile (or the default); a clear error lists the known names."""
        key = name or self.default_profile
        try:
            return self.profiles[key]
        except KeyError:
            known = ", ".join(sorted(self.profiles)) or "none"
            where = ", ".join(self.sources) or "no tiers.yaml found"
            why = ("; the built-in 'cluster' profile exists only where sbatch is on PATH (Jupyter "
                   "running on a Slurm cluster)" if key == BUILTIN_CLUSTER else "")
            raise ConfigError(
                where, f"profiles.{_shown(key)}", f"no such profile; known profiles: {known}{why}"
            ) from None


def _type_name(t: type | tuple[type, ...]) -> str:
    names = {int: "an integer", str: "a string", bool: "true/false", list: "a list",
             dict: "a mapping", float: "a number"}
    if isinstance(t, tuple):
        return " or ".join(names.get(x, x.__name__) for x in t)
    return names.get(t, t.__name__)


def _check_type(value: Any, expected: type | tuple[type, ...], source: str, key: str) -> None:
    types = expected if isinstance(expected, tuple) else (expected,)
    # bool is an int subclass; never accept it where a number is wanted.
    if isinstance(value, bool) and bool not in types:
        ok = False
    else:
        ok = isinstance(value, types)
    if not ok:
        raise ConfigError(
            source, key, f"expected {_type_name(expected)}, got {type(value).__name__}"
            + ("" if isinstance(value, (dict, list)) else f" {_shown(repr(value), 60)}")
        )


def _norm_key(key: str) -> str:
    return key.replace("-", "_")


def validate_profile(name: str, raw: Any, source: str) -> dict[str, Any]:
    """Check one profile mapping from one file; returns it with keys normalised."""
    base = f"profiles.{name}"
    if not _NAME_RE.fullmatch(str(name)):
        raise ConfigError(source, f"profiles.{_shown(name)}",
                          "profile names use letters, digits, '.', '_' and '-' (at most 64)")
    if not isinstance(raw, dict):
        raise ConfigError(source, base, f"expected a mapping, got {type(raw).__name__}")
    out: dict[str, Any] = {}
    tier = raw.get("tier")
    tier = TIER_ALIASES.get(tier, tier) if isinstance(tier, str) else tier
    if tier is not None and tier not in TIERS:
        raise ConfigError(source, f"{base}.tier", f"must be one of {', '.join(TIERS)}, got {tier!r}")
    allowed = TIER_KEYS[tier] if tier else {k: v for t in TIERS for k, v in TIER_KEYS[t].items()}
    for key, value in raw.items():
        k = _norm_key(str(key))
        if k not in allowed:
            choices = ", ".join(sorted(allowed))
            raise ConfigError(source, f"{base}.{key}", f"unknown key; allowed: {choices}")
        _check_type(value, allowed[k], source, f"{base}.{key}")
        out[k] = tier if k == "tier" else value
    if "port" in out and not 1 <= out["port"] <= 65535:
        raise ConfigError(source, f"{base}.port", f"must be 1-65535, got {out['port']}")
    _check_connection(out, source, base)
    for key, (low, high) in _SECONDS_BOUNDS.items():
        if key in out and not (math.isfinite(out[key]) and low <= out[key] <= high):
            raise ConfigError(source, f"{base}.{key}", f"seconds from {low:g} to {high:g}, got {out[key]!r}")
    for i, line in enumerate(out.get("setup", [])):
        if not isinstance(line, str) or "\n" in line or "\r" in line:
            raise ConfigError(source, f"{base}.setup[{i}]", "each setup entry is one line of text")
    if "env" in out:
        env: dict[str, str] = {}
        for k, v in out["env"].items():
            if not isinstance(k, str) or not _ENV_KEY_RE.fullmatch(k):
                raise ConfigError(
                    source, f"{base}.env.{_shown(k)}", "environment names use letters, digits and '_'"
                )
            if not isinstance(v, (str, int, float)) or isinstance(v, bool):  # the value is not shown
                raise ConfigError(source, f"{base}.env.{k}", "expected a string or a number")
            if "\x00" in str(v):
                raise ConfigError(source, f"{base}.env.{k}", "a value cannot contain a NUL byte")
            if slurm_env_name(k):  # from any file: Slurm's commands would read it as an option
                raise ConfigError(source, f"{base}.env.{k}", "Slurm's commands read SBATCH_*, SALLOC_*, "
                                  "SRUN_* and SLURM_* as their options, so jupyter-tiers reserves them; "
                                  "set the option in the profile's defaults (e.g. defaults.account, "
                                  "defaults.sbatch_options) instead")
            env[str(k)] = str(v)
        out["env"] = env
    if "defaults" in out:
        out["defaults"] = check_defaults(out["defaults"], default_keys(tier), source, base)
    _check_kubernetes_keys(out, source, base)
    _check_object_store(out, tier, source, base)
    if "load_limit_rps" in out:
        limit = out["load_limit_rps"]
        if not (math.isfinite(limit) and 1 <= limit <= MAX_LIMIT_RPS):
            raise ConfigError(source, f"{base}.load_limit_rps",
                              f"requests per second from 1 to {MAX_LIMIT_RPS}, got {limit!r}")
    return out


def _check_object_store(out: Mapping[str, Any], tier: str | None, source: str, base: str) -> None:
    """``object_store`` (objectstore.parse_object_store) and ``fetch_image`` (an image name)."""
    if "object_store" in out:
        try:
            parse_object_store(out["object_store"], tier)
        except ValueError as exc:
            sub, message = exc.args[0]
            raise ConfigError(source, f"{base}.object_store" + (f".{sub}" if sub else ""), message) from None
    image = out.get("fetch_image")
    if image is not None and (not image or any(c.isspace() or not c.isprintable() for c in image)):
        raise ConfigError(source, f"{base}.fetch_image", "an image name without spaces, e.g. "
                          "amazon/aws-cli:2.15.0")


def check_defaults(raw: Mapping[str, Any], keys: Mapping[str, type | tuple[type, ...]], source: str,
                   base: str) -> dict[str, Any]:
    """A profile's ``defaults`` with keys normalised; unknown keys and wrong types are errors."""
    defaults: dict[str, Any] = {}
    for k, v in raw.items():
        nk = _norm_key(str(k))
        if nk not in keys:
            choices = ", ".join(sorted(keys))
            raise ConfigError(source, f"{base}.defaults.{_shown(k)}", f"unknown key; allowed: {choices}")
        _check_type(v, keys[nk], source, f"{base}.defaults.{k}")
        if nk == "sbatch_options":
            for i, item in enumerate(v):
                if not isinstance(item, str):
                    raise ConfigError(source, f"{base}.defaults.{k}[{i}]",
                                      f"expected a string such as --hold, got {type(item).__name__}")
                try:  # refused options are refused from any file (jobspec.parse_sbatch_option)
                    parse_sbatch_option(item)
                except SpecError as exc:
                    raise ConfigError(source, f"{base}.defaults.{k}[{i}]", exc.problem) from None
        defaults[nk] = v
    return defaults


def _shown(value: Any, limit: int = 40) -> str:
    """A key or value as it may appear in a message: short, printable."""
    text = str(value)
    text = "".join(c if c.isprintable() else "?" for c in text[:limit])
    return text + ("..." if len(str(value)) > limit else "")


def _check_connection(out: Mapping[str, Any], source: str, base: str) -> None:
    """Host, user and jump host as OpenSSH accepts them (nothing a shell or ssh_config token
    such as ProxyCommand's %h could turn into a command or an option)."""
    if "host" in out and not valid_host(out["host"]):
        raise ConfigError(source, f"{base}.host", f"{_shown(out['host'])!r} is not a host name; use "
                          "letters, digits, '.', '-', '_' (or an IPv4/[IPv6] address), not starting with '-'")
    if "user" in out and not valid_user(out["user"]):
        raise ConfigError(source, f"{base}.user", f"{_shown(out['user'])!r} is not a user name; use "
                          "letters, digits, '.', '_', '-', '@', not starting with '-'")
    if "proxy_jump" in out and not all(_JUMP_RE.fullmatch(hop) for hop in out["proxy_jump"].split(",")):
        raise ConfigError(source, f"{base}.proxy_jump", f"{_shown(out['proxy_jump'])!r}: "
                          "use [user@]host[:port], comma-separated, or none")
    for key in ("identity_file", "known_hosts", "ssh_config", "kubeconfig", "workdir"):
        value = out.get(key)
        if value is not None and (not value or any(not c.isprintable() for c in value)):
            raise ConfigError(source, f"{base}.{key}", "a path of printable characters")


_DNS_LABEL_RE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
MODEL_VOLUME_KINDS = ("pvc", "nfs", "host_path")


def _check_kubernetes_keys(out: dict[str, Any], source: str, base: str) -> None:
    if "namespace" in out and not _DNS_LABEL_RE.fullmatch(out["namespace"]):
        raise ConfigError(source, f"{base}.namespace",
                          "a DNS-1123 label: lower-case letters, digits and '-', at most 63")
    if "service_type" in out and out["service_type"] not in SERVICE_TYPES:
        raise ConfigError(source, f"{base}.service_type", f"one of {', '.join(SERVICE_TYPES)}")
    if "ingress_class" in out or "ingress_annotations" in out:
        _check_ingress_keys(out, source, base)
    for i, name in enumerate(out.get("image_pull_secrets", [])):
        if not isinstance(name, str) or not _DNS_LABEL_RE.fullmatch(name):
            raise ConfigError(source, f"{base}.image_pull_secrets[{i}]", "a Secret name (DNS-1123 label)")
    volume = out.get("model_volume")
    if volume is not None:
        kinds = [k for k in volume if k in MODEL_VOLUME_KINDS]
        extra = set(volume) - set(MODEL_VOLUME_KINDS) - {"sub_path", "path_map"}
        if len(kinds) != 1 or extra:
            raise ConfigError(source, f"{base}.model_volume",
                              "exactly one of pvc: NAME, nfs: {server, path}, host_path: PATH")
        if "path_map" in volume:
            _check_path_map(volume["path_map"], source, f"{base}.model_volume.path_map")
    if "path_map" in out:
        _check_path_map(out["path_map"], source, f"{base}.path_map")


def _check_ingress_keys(out: Mapping[str, Any], source: str, base: str) -> None:
    try:
        if "ingress_class" in out:
            check_ingress_class(out["ingress_class"])
        if "ingress_annotations" in out:
            check_ingress_annotations(out["ingress_annotations"])
    except SpecError as exc:
        raise ConfigError(source, f"{base}.{exc.field}", exc.problem) from None


def _check_path_map(value: Any, source: str, key: str) -> None:
    """A path_map: training-side path prefix -> where it appears here (handoff.py)."""
    try:
        parse_path_map(value)
    except ValueError as exc:
        raise ConfigError(source, key, str(exc)) from None


def load_file(path: Path, *, trusted: bool = True) -> dict[str, Any]:
    """Read and validate one tiers.yaml; returns {"profiles": {...}, "default_profile": ...}.

    ``trusted``: an admin, user or explicitly named file, which may set ``trust_project_config``.
    """
    source = str(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(source, "", f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(source, "", f"larger than {MAX_CONFIG_BYTES // (1024 * 1024)} MB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(source, f"line {line}", "not UTF-8 text; save the file as UTF-8") from None
    data = parse_yaml(text, source)
    if data is None:
        return {"profiles": {}}
    if not isinstance(data, dict):
        raise ConfigError(source, "", "the top level must be a mapping with a 'profiles' key")
    top = {"profiles", "default_profile", TRUST_KEY}
    unknown = [str(k) for k in data if k not in top]
    if unknown:
        raise ConfigError(
            source, _shown(sorted(unknown)[0]),
            f"unknown top-level key; allowed: default_profile, profiles, {TRUST_KEY}"
        )
    profiles = data.get("profiles") or {}
    if not isinstance(profiles, dict):
        raise ConfigError(source, "profiles", "expected a mapping of profile name -> settings")
    out: dict[str, Any] = {
        "profiles": {str(n): validate_profile(str(n), p, source) for n, p in profiles.items()}
    }
    if "default_profile" in data:
        _check_type(data["default_profile"], str, source, "default_profile")
        out["default_profile"] = data["default_profile"]
    if TRUST_KEY in data:
        _check_type(data[TRUST_KEY], bool, source, TRUST_KEY)
        if not trusted:
            raise ConfigError(source, TRUST_KEY, "only /etc/jupyter/tiers.yaml or ~/.jupyter/tiers.yaml "
                              "may set it (a project file cannot trust itself)")
        out[TRUST_KEY] = data[TRUST_KEY]
    return out


def config_paths(cwd: Path | None = None) -> list[tuple[Path, bool]]:
    """The layer files in precedence order, each with whether it must exist."""
    paths: list[tuple[Path, bool]] = [
        (SYSTEM_PATH, False),
        (USER_PATH.expanduser(), False),
    ]
    env_path = os.environ.get(ENV_VAR)
    if env_path:
        paths.append((Path(env_path).expanduser(), True))
    else:
        paths.append(((cwd or Path.cwd()) / PROJECT_NAME, False))
    return paths


#: The last line of every refusal: how a user opts in to trusting the project file.
OPT_IN = _OPT_IN = (f"to allow it, set {TRUST_KEY}: true in ~/.jupyter/tiers.yaml, or {TRUST_ENV_VAR}=1, "
           f"or name this file in ${ENV_VAR}")


@dataclass(frozen=True)
class Refusal:
    """One thing a project file tried: the key as written under ``profiles``, the value shown
    (empty where it may be a secret) and why it is refused."""

    key: str
    tried: str
    why: str

    def line(self) -> str:
        return f"{self.key}{' = ' + self.tried if self.tried else ''}: {self.why}"


class ProjectFileRefused(ConfigError):
    """What an untrusted project tiers.yaml tried to set, all of it, one line per key; ``key``
    is the first refused key."""

    def __init__(self, source: str, refusals: Sequence[Refusal]) -> None:
        self.refusals = tuple(refusals)
        head = ("refused a setting of this project file" if len(refusals) == 1 else
                f"refused {len(refusals)} settings of this project file")
        problem = "\n".join([f"{head} (it may have come with a cloned repository):",
                              *(f"  {r.line()}" for r in self.refusals), _OPT_IN])
        super().__init__(source, self.refusals[0].key, problem)
        self.args = (f"{source}: {problem}",)


def _tried(value: Any) -> str:
    """A refused value as the refusal line shows it: short, one line, printable."""
    import json

    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = type(value).__name__
    return _shown(text, 60)


def _project_refusals(name: str, prof: Mapping[str, Any], trusted_from: str | None,
                      current: Mapping[str, Any]) -> list[Refusal]:
    """What an untrusted project file may not do to profile ``name``: every key the allowlist
    (:data:`PROJECT_KEYS`) does not allow on a trusted profile (``trusted_from`` names its file)
    or on the project's own profile (``trusted_from`` is None). ``current`` is the profile as the
    trusted layers left it (repeating a value is no change)."""
    base = f"profiles.{_shown(name)}"
    where = "never from a project file" if trusted_from is None else f"{name} is defined in {trusted_from}"
    out: list[Refusal] = []

    def allowed(key: str) -> bool:
        row = rule(key)
        return row.on_trusted if trusted_from is not None else row.on_own

    for key in sorted(prof):
        if not allowed(key) and current.get(key) != prof[key]:
            shown = "" if key == "object_store" else _tried(prof[key])  # may hold credentials
            out.append(Refusal(f"{base}.{key}", shown, f"decides {rule(key).decides}; {where}"))
    tier = str(prof.get("tier"))
    if trusted_from is None and TIER_ALIASES.get(tier, tier) == "kubernetes":
        out.append(Refusal(f"{base}.tier", "\"kubernetes\"", "a project file's own kubernetes profile "
                           "would use your kubeconfig's current context and namespace; never from a "
                           "project file (add the profile to ~/.jupyter/tiers.yaml)"))
    had = current.get("defaults") or {}
    for key, value in sorted(prof.get("defaults", {}).items()):
        if not allowed(f"defaults.{key}") and had.get(key) != value:
            out.append(Refusal(f"{base}.defaults.{key}", _tried(value),
                               f"decides {rule(f'defaults.{key}').decides}; {where}"))
    had_env = current.get("env") or {}
    for key, value in sorted(prof.get("env", {}).items()):
        if not project_env_allowed(key) and had_env.get(key) != value:  # the value is never shown
            out.append(Refusal(f"{base}.env.{_shown(key)}", "",
                               f"{refused_env_decides(key)}; never from a project file"))
    return out


def _builtins(on_cluster: bool) -> dict[str, dict[str, Any]]:
    """The built-in profiles' starting keys (a file's profile of the same name adds to them)."""
    out: dict[str, dict[str, Any]] = {name: dict(keys) for name, keys in BUILTIN_PROFILES.items()}
    if on_cluster:
        out[BUILTIN_CLUSTER] = {"tier": "slurm"}
    return out


def merge_layers(layers: Sequence[tuple[str, dict[str, Any]]], *,
                 untrusted: Collection[str] = (), on_cluster: bool = False) -> Config:
    """Merge validated layers (lowest precedence first) into a Config.

    ``untrusted``: the sources that are project files the user has not opted in to trust.
    ``on_cluster``: this machine has ``sbatch`` (the built-in :data:`BUILTIN_CLUSTER` exists).
    """
    builtins = _builtins(on_cluster)
    merged: dict[str, dict[str, Any]] = {}
    origins: dict[str, list[str]] = {}
    trusted_origin: dict[str, str] = dict.fromkeys(builtins, "jupyter-tiers (built in)")
    if on_cluster:  # a file may give the built-in cluster profile defaults without repeating its tier
        merged[BUILTIN_CLUSTER] = dict(builtins[BUILTIN_CLUSTER])
        origins[BUILTIN_CLUSTER] = ["built-in"]
    default_profile: str | None = None
    default_source = ""
    refusals: list[Refusal] = []
    refused_source = ""
    for source, layer in layers:
        guarded = source in untrusted
        for name, prof in layer.get("profiles", {}).items():
            if guarded:
                current = merged.get(name, builtins.get(name, {}))
                found = _project_refusals(name, prof, trusted_origin.get(name), current)
                refusals += found
                refused_source = refused_source or (source if found else "")
            else:
                trusted_origin.setdefault(name, source)
            target = merged.setdefault(name, dict(builtins.get(name, {})))  # local: its tier
            for key, value in prof.items():
                if key in ("defaults", "env") and isinstance(target.get(key), dict):
                    target[key] = {**target[key], **value}
                else:
                    target[key] = value
            origins.setdefault(name, []).append(source)
        if "default_profile" in layer:
            default_profile = layer["default_profile"]
            default_source = source
    if default_source in untrusted and default_profile not in trusted_origin:
        tier = merged.get(default_profile or "", {}).get("tier")
        if tier is not None:
            # A project's own profile runs only when the notebook names it.
            refusals.append(Refusal("default_profile", _tried(default_profile), f"a project file may "
                                    f"not make its own {tier} profile the default (name it with --profile)"))
            refused_source = refused_source or default_source
    if refusals:
        raise ProjectFileRefused(refused_source, refusals)
    sources = tuple(src for src, _ in layers)
    profiles: dict[str, Profile] = {}
    for name, raw in merged.items():
        tier = raw.get("tier")
        src = origins[name][-1]
        if tier is None:
            raise ConfigError(src, f"profiles.{name}.tier", f"missing; one of {', '.join(TIERS)}")
        allowed = TIER_KEYS[tier]
        for key in raw:
            if key not in allowed:
                raise ConfigError(
                    src, f"profiles.{name}.{key}", f"not a key of a {tier} profile; allowed: "
                    + ", ".join(sorted(allowed))
                )
        if "defaults" in raw:
            raw["defaults"] = check_defaults(raw["defaults"], default_keys(tier), src, f"profiles.{name}")
        if tier == "slurm" and not raw.get("host"):  # Slurm's commands on this machine
            for key in SSH_ONLY_KEYS:
                if key in raw:
                    raise ConfigError(src, f"profiles.{name}.{key}", "only with host (the login "
                                      "node reached over SSH); a slurm profile without host runs "
                                      "Slurm's commands on this machine")
        settings = {k: v for k, v in raw.items() if k not in ("defaults", "env", "setup", "tier")}
        profiles[name] = Profile(
            name=name,
            tier=tier,
            settings=settings,
            defaults=dict(raw.get("defaults", {})),
            env=dict(raw.get("env", {})),
            setup=tuple(raw.get("setup", ())),
            sources=tuple(origins[name]),
            project_defined=name not in trusted_origin,
        )
    if BUILTIN_LOCAL not in profiles:
        profiles[BUILTIN_LOCAL] = Profile(name=BUILTIN_LOCAL, tier="local", sources=("built-in",))
    if default_profile is None:
        default_profile = BUILTIN_LOCAL
    if default_profile not in profiles:
        raise ConfigError(
            sources[-1] if sources else "tiers.yaml",
            "default_profile",
            f"names no profile; known: {', '.join(sorted(profiles))}",
        )
    return Config(profiles=profiles, default_profile=default_profile, sources=sources)


def sbatch_here() -> bool:
    """Whether this machine has ``sbatch`` on PATH (then the built-in ``cluster`` profile exists)."""
    return shutil.which("sbatch") is not None


def load_config(cwd: Path | None = None) -> Config:
    """Read every layer that exists and merge them (the trust rules in the module docstring)."""
    layers: list[tuple[str, dict[str, Any]]] = []
    paths = config_paths(cwd)
    project = None if os.environ.get(ENV_VAR) else paths[-1][0]
    trust = os.environ.get(TRUST_ENV_VAR, "").strip().lower() in ("1", "true", "yes")
    seen: set[Path] = set()
    for path, required in paths:
        if not path.exists():
            if required:
                raise ConfigError(str(path), "", f"file named by ${ENV_VAR} does not exist")
            continue
        real = path.resolve()
        if real in seen:  # e.g. Jupyter started in ~/.jupyter: the user file, not a project file
            project = None
            continue
        seen.add(real)
        layer = load_file_cached(path, load_file, trusted=path != project)
        trust = trust or bool(layer.get(TRUST_KEY))
        layers.append((str(path), layer))
    untrusted = () if trust or project is None else (str(project),)
    if not trust:  # a project file's ingress_annotations are refused with its other keys
        _refuse_snippets([(src, layer) for src, layer in layers if src not in untrusted])
    return merge_layers(layers, untrusted=untrusted, on_cluster=sbatch_here())


def _refuse_snippets(layers: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
    """Ingress annotations that configure the controller itself (servespec.snippet_annotation) are
    refused from the trusted files too, unless the user opted in."""
    for source, layer in layers:
        for name, prof in layer.get("profiles", {}).items():
            for key in prof.get("ingress_annotations") or {}:
                if snippet_annotation(str(key)):
                    where = f"profiles.{_shown(name)}.ingress_annotations.{_shown(key, 80)}"
                    raise ConfigError(source, where,
                                      "configures the ingress controller itself (for every site it "
                                      f"serves); refused from any file without the opt-in; {OPT_IN}")
