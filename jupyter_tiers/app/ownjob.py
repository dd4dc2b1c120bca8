"""The Slurm job the notebook server (or kernel) itself runs inside (Open OnDemand's Jupyter app,
JupyterHub with batchspawner): the sidebar's row marked as the notebook's own, and the refusal to
cancel it.

The row belongs to a slurm profile without ``host`` (its commands run on this machine, so this is
the job's own cluster): the default profile when it is one, else the built-in ``cluster``, else the
first by name. A profile reached over SSH may be another cluster, where the same number is someone
else's job: neither the row nor the refusal applies there.

Typical use::

    item = own_item(os.environ)      # None outside a job or without an on-cluster profile
    check_cancel("cluster/4242")     # OwnJob when 4242 is the job this process runs inside
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from ..batch.jobenv import enclosing_job, refuse_own_job
from ..config.profiles import BUILTIN_CLUSTER, Config, load_config
from ..config.registry import Registry
from ..core.errors import TiersError

#: What the row shows beside the job's id, and its tooltip.
OWN_LABEL = "this notebook"
OWN_NOTE = ("This JupyterLab runs inside this Slurm job. It is shown so you see where the notebook "
            "runs; it has no Cancel (that would stop this notebook and its kernels). End it from "
            "the portal that started it, or with scancel in a terminal.")


def local_slurm_profiles(cfg: Config) -> list[str]:
    """Names of the slurm profiles without ``host`` (slurm.tier.runs_here: their commands run
    on this machine), sorted."""
    return sorted(name for name, prof in cfg.profiles.items()
                  if prof.tier == "slurm" and not prof.get("host"))


def own_profile(cfg: Config) -> str | None:
    """The profile the server's own job is listed under (see the module docstring), or None."""
    local = local_slurm_profiles(cfg)
    for name in (cfg.default_profile, BUILTIN_CLUSTER):
        if name in local:
            return name
    return local[0] if local else None


def own_item(environ: Mapping[str, str] | None = None, cfg: Config | None = None,
             now: float | None = None) -> dict[str, Any] | None:
    """The sidebar row (the REST API's item, with ``own: true``) of the job ``environ`` (default:
    this process's) runs inside; None outside a job, when no profile runs Slurm here, or when the
    configuration cannot be read."""
    job = enclosing_job(os.environ if environ is None else environ)
    if job is None:
        return None
    try:
        profile = own_profile(cfg or load_config())
    except TiersError:
        return None
    if profile is None:
        return None
    started = elapsed = None
    if job.start_time is not None:
        now = time.time() if now is None else now
        started = datetime.fromtimestamp(job.start_time, tz=timezone.utc).isoformat(timespec="seconds")
        elapsed = max(0, int(now - job.start_time))
    where = job.node or ""
    return {"key": f"{profile}/{job.job_id}", "id": job.job_id, "kind": "job",
            "name": job.name or "jupyter", "profile": profile, "tier": "slurm", "state": "RUNNING",
            "terminal": False, "size": OWN_LABEL, "where": where, "reason": "",
            "started": started, "elapsed_s": elapsed,
            "summary": f"{OWN_LABEL} runs inside Slurm job {job.job_id}"
                       + (f" on node {where}" if where else ""),
            "submitted": None, "canary": None, "upload": None,
            "elapsed_at": None if elapsed is None else round(now or time.time(), 3),
            "own": True, "own_note": OWN_NOTE}


def aged(item: dict[str, Any], now: float | None = None) -> dict[str, Any]:
    """A copy of the own row with ``elapsed_s`` as of ``now`` (default: the clock): the row is
    made once and never updated by a watch, so each answer recomputes it from ``started``."""
    out = dict(item)
    started = item.get("started")
    if isinstance(started, str):
        try:
            begun = datetime.fromisoformat(started).timestamp()
        except ValueError:
            return out
        now = time.time() if now is None else now
        out["elapsed_s"], out["elapsed_at"] = max(0, int(now - begun)), round(now, 3)
    return out


def mark_own(item: dict[str, Any]) -> dict[str, Any]:
    """``item`` (a registry row whose key is the own job's) marked as the notebook's own."""
    return {**item, "own": True, "own_note": OWN_NOTE}


def check_cancel(ref: str, environ: Mapping[str, str] | None = None, cfg: Config | None = None,
                 registry: Registry | None = None) -> None:
    """Raise :class:`~jupyter_tiers.core.errors.OwnJob` when ``ref`` (``profile/id`` or ``id``)
    names the job this process runs inside (or its array) on a profile that runs Slurm here. A
    bare id the registry records under a profile reached over SSH is another cluster's job."""
    env = os.environ if environ is None else environ
    job = enclosing_job(env)
    if job is None:
        return
    profile, _, job_id = ref.strip().rpartition("/")
    if job_id.strip() not in job.ids():
        return
    try:
        local = local_slurm_profiles(cfg or load_config())
    except TiersError:
        return  # no configuration: nothing can be cancelled through it either
    if not profile:
        try:
            profile = (registry or Registry()).get(job_id).profile
        except TiersError:  # not recorded (or no registry): this machine's cluster
            profile = local[0] if local else ""
    if profile in local:
        refuse_own_job(job_id, env)


def with_own(items: list[dict[str, Any]], own: dict[str, Any], *, profile: str | None = None,
             kind: str | None = None) -> list[dict[str, Any]]:
    """A listing's ``items`` with the own row: the registry's row of that key marked, else the
    row first, when the ``profile`` and ``kind`` filters let it in. Pure; ``items`` is not changed."""
    if profile not in (None, own["profile"]) or kind not in (None, "job"):
        return list(items)
    if any(i.get("key") == own["key"] for i in items):
        return [mark_own(i) if i.get("key") == own["key"] else i for i in items]
    return [dict(own), *items]
