"""Profile name (and kind of work) -> tier, cached so every caller in a process shares one
connection and watcher.

A profile of ``tier: local`` (and the built-in ``local`` profile) does both kinds of work: jobs
on the LocalTier, services on the LocalServeTier. A Slurm profile only runs jobs and a Kubernetes
profile only serves; for them ``kind`` changes nothing (the caller checks what it got).

The kind of work is a :class:`~jupyter_tiers.core.model.WorkKind` everywhere in the package. ``connect``
also takes its value (``"job"``, ``"service"``) and, for code written before WorkKind, the old
words ``"batch"`` and ``"serve"``; :func:`connect_batch` and :func:`connect_serve` are the typed
entry points.
"""

from __future__ import annotations

import threading

from .config.profiles import Profile, load_config
from .config.registry import JobRecord, Registry
from .core.errors import SpecError
from .core.model import WorkKind
from .engine.tier import BatchTier, ServeTier, Tier
from .transport.errors import OneTimeCodeRequired
from .transport.prompt import refusing_prompter, set_prompter

__all__ = ["KINDS", "OneTimeCodeRequired", "WorkKind", "cached", "cached_tiers", "close_all", "connect",
           "connect_batch", "connect_serve", "make_tier", "normalize_kind", "refuse_prompts", "tier_for"]

#: The kinds of work, in the order ``connect`` documents them.
KINDS = (WorkKind.JOB, WorkKind.SERVICE)
# The words connect(kind=) accepts: WorkKind's values, and batch/serve from before WorkKind.
_KIND_ALIASES = {"job": WorkKind.JOB, "batch": WorkKind.JOB,
                 "service": WorkKind.SERVICE, "serve": WorkKind.SERVICE}

_tiers: dict[tuple[str, WorkKind], Tier] = {}
_lock = threading.Lock()


def normalize_kind(kind: WorkKind | str) -> WorkKind:
    """The :class:`WorkKind` of ``kind``: a WorkKind, ``job``/``service``, or the older
    ``batch``/``serve``. Anything else is a SpecError naming what is allowed."""
    if isinstance(kind, WorkKind):
        return kind
    try:
        return _KIND_ALIASES[kind]
    except (KeyError, TypeError):
        raise SpecError("kind", f"{kind!r} is not a kind of work; use job or service") from None


def make_tier(profile: Profile, registry: Registry | None = None,
              kind: WorkKind | str = WorkKind.JOB) -> Tier:
    """A new tier object for ``profile`` and ``kind`` of work (not cached). A record of the other
    kind of work that it is asked to handle goes to this process's cached tier for it."""
    tier = _new_tier(profile, registry, normalize_kind(kind))
    tier.sibling = tier_for
    return tier


def _new_tier(profile: Profile, registry: Registry | None, kind: WorkKind) -> Tier:
    # A backend loads when a profile first needs it: a laptop never loads the Kubernetes tier.
    if profile.tier == "slurm":
        # lazy: a backend loads only when a profile uses it
        from .slurm.tier import SlurmTier

        return SlurmTier(profile, registry)
    if profile.tier == "local":
        if kind is WorkKind.SERVICE:
            # lazy: a backend loads only when a profile uses it
            from .local.serve_tier import LocalServeTier

            return LocalServeTier(profile, registry)
        # lazy: a backend loads only when a profile uses it
        from .local.tier import LocalTier

        return LocalTier(profile, registry)
    if profile.tier == "kubernetes":
        # lazy: a backend loads only when a profile uses it (PyYAML, k8s modules)
        from .k8s.tier import K8sTier

        return K8sTier(profile, registry)
    raise SpecError("profile", f"tier {profile.tier!r} of profile {profile.name!r} is not known")


def _cache_kind(profile: Profile, kind: WorkKind) -> WorkKind:
    # Only a local profile has two tiers; the others share one object for both kinds.
    return kind if profile.tier == "local" else WorkKind.JOB


def connect(profile: str | None = None, kind: WorkKind | str = WorkKind.JOB) -> Tier:
    """The cached tier for a profile name (the default profile when None) and kind of work:
    ``WorkKind.JOB`` (training jobs, the default) or ``WorkKind.SERVICE`` (services); the
    strings ``"job"``/``"service"`` and the older ``"batch"``/``"serve"`` are accepted too."""
    kind = normalize_kind(kind)
    prof = load_config().profile(profile)
    key = (prof.name, _cache_kind(prof, kind))
    with _lock:
        tier = _tiers.get(key)
        if tier is None or tier.profile != prof:
            if tier is not None:
                tier.close()
            tier = _tiers[key] = make_tier(prof, kind=kind)
        return tier


def connect_batch(profile: str | None = None) -> BatchTier:
    """The cached training tier of a profile (Slurm or local): ``connect(profile)``, typed. A
    Kubernetes profile is a SpecError naming the profiles that run training jobs."""
    tier = connect(profile, kind=WorkKind.JOB)
    if not isinstance(tier, BatchTier):
        raise SpecError("profile", f"{tier.name!r} is a {tier.profile.tier} profile; training jobs "
                        "run on a slurm or local profile")
    return tier


def connect_serve(profile: str | None = None) -> ServeTier:
    """The cached serving tier of a profile (Kubernetes or local): ``connect(profile,
    WorkKind.SERVICE)``, typed. A Slurm profile is a SpecError naming the profiles that serve."""
    tier = connect(profile, kind=WorkKind.SERVICE)
    if not isinstance(tier, ServeTier):
        raise SpecError("profile", f"{tier.name!r} is a {tier.profile.tier} profile; services run "
                        "on a kubernetes or local profile")
    return tier


def cached_tiers() -> dict[tuple[str, WorkKind], Tier]:
    """A snapshot of this process's cached tiers, keyed by (profile name, kind of work); a Slurm
    or Kubernetes profile's one tier is under ``WorkKind.JOB``."""
    with _lock:
        return dict(_tiers)


def cached(profile: Profile) -> Tier | None:
    """The tier already cached for exactly this profile (its job tier), or None; never makes one
    (``doctor`` reuses a Slurm connection that ``%tiers login`` opened with a one-time code)."""
    with _lock:
        tier = _tiers.get((profile.name, WorkKind.JOB))
        return tier if tier is not None and tier.profile == profile else None


def tier_for(record: JobRecord) -> Tier:
    """The tier that runs a registry record (its profile, and the tier for its kind of work)."""
    return connect(record.profile, kind=record.kind)


def refuse_prompts(reason: str) -> None:
    """Nobody can be asked for a login node's one-time code in this process (``reason`` says who
    cannot ask): a profile that needs one fails at once with :class:`OneTimeCodeRequired`."""
    set_prompter(refusing_prompter(reason))


def close_all() -> None:
    """Close every cached tier (tests, kernel shutdown)."""
    with _lock:
        for tier in _tiers.values():
            tier.close()
        _tiers.clear()
