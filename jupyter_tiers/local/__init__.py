"""The embedded local tier: a job's ranks run as local processes, with the environment a Slurm task
sees and fail-stop (``profile local``; no cluster needed). See tier.py and supervisor.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .tier import LocalTier

__all__ = ["LocalTier"]


def __getattr__(name: str) -> Any:
    if name == "LocalTier":
        # lazy: `python -m jupyter_tiers.local.supervisor` starts without the tier
        from .tier import LocalTier

        return LocalTier
    raise AttributeError(name)
