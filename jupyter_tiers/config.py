"""Profiles: layered YAML files describing where and how jobs run.

Layers, lowest precedence first: ``/etc/jupyter/tiers.yaml`` (a lab's admins), ``~/.jupyter/tiers.yaml``
(the user), then the project file: ``$JUPYTER_TIERS_CONFIG`` if set, else ``./tiers.yaml`` (shipped
next to shared notebook templates). Magic arguments override all of them. A later layer overrides a
profile key by key (``defaults`` and ``env`` are merged key by key too).

Every problem is a :class:`ConfigError` naming the file, the key and what is allowed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .model import SERVICE_TYPES

__all__ = ["Config", "ConfigError", "Profile", "load_config"]

TIERS = ("slurm", "local", "kubernetes")
TIER_ALIASES = {"k8s": "kubernetes"}
ENV_VAR = "JUPYTER_TIERS_CONFIG"
SYSTEM_PATH = Path("/etc/jupyter/tiers.yaml")
USER_PATH = Path("~/.jupyter/tiers.yaml")
PROJECT_NAME = "tiers.yaml"
BUILTIN_LOCAL = "local"

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Keys of ``defaults``: the spec options a profile may preset (options.py; dashes accepted for
# underscores). Training tiers take job options, the Kubernetes tier serve options.
def default_keys(tier: str | None) -> dict[str, type | tuple[type, ...]]:
    """The keys a profile of ``tier`` may set in ``defaults`` (every tier's when unknown)."""
    from .options import JOB_OPTIONS, SERVE_OPTIONS, profile_keys

    job, serve = profile_keys(JOB_OPTIONS), profile_keys(SERVE_OPTIONS)
    if tier in ("slurm", "local"):
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
    },
    "local": {**_COMMON_KEYS},
    "kubernetes": {
        **_COMMON_KEYS,
        "context": str,
        "kubeconfig": str,
        "namespace": str,
        "service_type": str,
        "image_pull_secrets": list,
        "storage_class": str,
        "model_volume": dict,
        "request_timeout": (int, float),
    },
}


@dataclass(frozen=True)
class Profile:
    """One validated profile. ``sources`` lists the files that contributed to it."""

    name: str
    tier: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    defaults: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict, repr=False)  # values may be secrets
    setup: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()

    def get(self, key: str, default: Any = None) -> Any:
        return self.settings.get(key, default)

    @property
    def workdir(self) -> str:
        return str(self.settings.get("workdir", "~/jupyter-tiers"))


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
            raise ConfigError(
                where, f"profiles.{key}", f"no such profile; known profiles: {known}"
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
            source, key, f"expected {_type_name(expected)}, got {type(value).__name__} {value!r}"
        )


def _norm_key(key: str) -> str:
    return key.replace("-", "_")


def validate_profile(name: str, raw: Any, source: str) -> dict[str, Any]:
    """Check one profile mapping from one file; returns it with keys normalised."""
    base = f"profiles.{name}"
    if not _NAME_RE.match(str(name)):
        raise ConfigError(source, base, "profile names use letters, digits, '.', '_' and '-'")
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
    for i, line in enumerate(out.get("setup", [])):
        if not isinstance(line, str) or "\n" in line or "\r" in line:
            raise ConfigError(source, f"{base}.setup[{i}]", "each setup entry is one line of text")
    if "env" in out:
        env: dict[str, str] = {}
        for k, v in out["env"].items():
            if not _ENV_KEY_RE.match(str(k)):
                raise ConfigError(
                    source, f"{base}.env.{k}", "environment names use letters, digits and '_'"
                )
            if not isinstance(v, (str, int, float)) or isinstance(v, bool):
                raise ConfigError(source, f"{base}.env.{k}", "expected a string or a number")
            env[str(k)] = str(v)
        out["env"] = env
    if "defaults" in out:
        out["defaults"] = check_defaults(out["defaults"], default_keys(tier), source, base)
    _check_kubernetes_keys(out, source, base)
    return out


def check_defaults(raw: Mapping[str, Any], keys: Mapping[str, type | tuple[type, ...]], source: str,
                   base: str) -> dict[str, Any]:
    """A profile's ``defaults`` with keys normalised; unknown keys and wrong types are errors."""
    defaults: dict[str, Any] = {}
    for k, v in raw.items():
        nk = _norm_key(str(k))
        if nk not in keys:
            choices = ", ".join(sorted(keys))
            raise ConfigError(source, f"{base}.defaults.{k}", f"unknown key; allowed: {choices}")
        _check_type(v, keys[nk], source, f"{base}.defaults.{k}")
        defaults[nk] = v
    return defaults


_DNS_LABEL_RE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
MODEL_VOLUME_KINDS = ("pvc", "nfs", "host_path")


def _check_kubernetes_keys(out: dict[str, Any], source: str, base: str) -> None:
    if "namespace" in out and not _DNS_LABEL_RE.fullmatch(out["namespace"]):
        raise ConfigError(source, f"{base}.namespace",
                          "a DNS-1123 label: lower-case letters, digits and '-', at most 63")
    if "service_type" in out and out["service_type"] not in SERVICE_TYPES:
        raise ConfigError(source, f"{base}.service_type", f"one of {', '.join(SERVICE_TYPES)}")
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


def load_file(path: Path) -> dict[str, Any]:
    """Read and validate one tiers.yaml; returns {"profiles": {...}, "default_profile": ...}."""
    import yaml

    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(source, "", f"cannot read: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(source, where, f"not valid YAML: {problem}") from None
    if data is None:
        return {"profiles": {}}
    if not isinstance(data, dict):
        raise ConfigError(source, "", "the top level must be a mapping with a 'profiles' key")
    unknown = set(data) - {"profiles", "default_profile"}
    if unknown:
        raise ConfigError(
            source, sorted(unknown)[0], "unknown top-level key; allowed: profiles, default_profile"
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


def merge_layers(layers: Sequence[tuple[str, dict[str, Any]]]) -> Config:
    """Merge validated layers (lowest precedence first) into a Config."""
    merged: dict[str, dict[str, Any]] = {}
    origins: dict[str, list[str]] = {}
    default_profile: str | None = None
    for source, layer in layers:
        for name, prof in layer.get("profiles", {}).items():
            target = merged.setdefault(name, {})
            for key, value in prof.items():
                if key in ("defaults", "env") and isinstance(target.get(key), dict):
                    target[key] = {**target[key], **value}
                else:
                    target[key] = value
            origins.setdefault(name, []).append(source)
        if "default_profile" in layer:
            default_profile = layer["default_profile"]
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
        if tier == "slurm" and not raw.get("host"):
            raise ConfigError(src, f"profiles.{name}.host", "a slurm profile needs a host")
        settings = {k: v for k, v in raw.items() if k not in ("defaults", "env", "setup", "tier")}
        profiles[name] = Profile(
            name=name,
            tier=tier,
            settings=settings,
            defaults=dict(raw.get("defaults", {})),
            env=dict(raw.get("env", {})),
            setup=tuple(raw.get("setup", ())),
            sources=tuple(origins[name]),
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


def load_config(cwd: Path | None = None) -> Config:
    """Read every layer that exists and merge them."""
    layers: list[tuple[str, dict[str, Any]]] = []
    for path, required in config_paths(cwd):
        if not path.exists():
            if required:
                raise ConfigError(str(path), "", f"file named by ${ENV_VAR} does not exist")
            continue
        layers.append((str(path), load_file(path)))
    return merge_layers(layers)
