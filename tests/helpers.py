"""Small helpers shared by several test folders."""

from __future__ import annotations

import contextlib

from jupyter_tiers import api
from jupyter_tiers.registry import Registry


def cancel_registered_jobs() -> None:
    """Leave no job running and no cached tier behind: cancel (best effort) every job the
    current registry knows, then close every cached tier (a cached tier keeps its registry)."""
    with contextlib.suppress(Exception):
        for rec in Registry().list(limit=1000):
            with contextlib.suppress(Exception):
                api.connect(rec.profile).cancel(rec)
    api.close_all()
