"""Profile name -> tier, cached so every caller in a process shares one connection and watcher."""

from __future__ import annotations

import threading

from .config import Profile, load_config
from .errors import SpecError
from .registry import Registry
from .tier import Tier

_tiers: dict[str, Tier] = {}
_lock = threading.Lock()


def make_tier(profile: Profile, registry: Registry | None = None) -> Tier:
    """A new tier object for ``profile`` (not cached)."""
    if profile.tier == "slurm":
        from .slurm.tier import SlurmTier

        return SlurmTier(profile, registry)
    if profile.tier == "local":
        from .local.tier import LocalTier

        return LocalTier(profile, registry)
    if profile.tier == "kubernetes":
        from .k8s.tier import K8sTier

        return K8sTier(profile, registry)
    raise SpecError("profile", f"tier {profile.tier!r} of profile {profile.name!r} is not known")


def connect(profile: str | None = None) -> Tier:
    """The cached tier for a profile name (the default profile when None)."""
    prof = load_config().profile(profile)
    with _lock:
        tier = _tiers.get(prof.name)
        if tier is None or tier.profile != prof:
            if tier is not None:
                tier.close()
            tier = _tiers[prof.name] = make_tier(prof)
        return tier


def close_all() -> None:
    """Close every cached tier (tests, kernel shutdown)."""
    with _lock:
        for tier in _tiers.values():
            tier.close()
        _tiers.clear()
