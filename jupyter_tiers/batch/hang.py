"""A job that looks hung, said once in the header (pure, no I/O; the clock is passed in).

A running job looks hung when, for ``after`` seconds (default 5 min, the profile key
``hang_after``), every rank is RUNNING, the log has no new line (so no new metric step either:
metrics are read from the log) and every rank's CPU is near idle (each rank's latest usage sample,
usage.py, below ``idle_cpu_pct`` % of one core): ``no progress on any rank for 7 min: Stacks?``.
Any progress clears it at once. Never said within ``warmup`` seconds of the ranks all running
(start-up, data loading and compilation are quiet too), for a job whose ranks are busy (a long
collective on a GPU keeps the CPU of its rank busy), without a usage sample of every rank
(``JT_USAGE=0``: the CPU cannot tell), or while nobody follows the log (the watcher cannot see
new lines).

:class:`HangWatch` is fed at each rank poll by the watcher (engine/watch.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core.errors import SpecError
from ..core.model import RankPhase, RankState

DEFAULT_AFTER_S = 300.0


@dataclass(frozen=True)
class HangRule:
    """Quiet for ``after`` s, not within ``warmup`` s of every rank running, every rank's CPU
    below ``idle_cpu_pct`` (100 = one core)."""

    after: float = DEFAULT_AFTER_S
    warmup: float = 180.0
    idle_cpu_pct: float = 10.0

    def __post_init__(self) -> None:
        if not (self.after > 0 and self.warmup >= 0 and 0 < self.idle_cpu_pct <= 100):
            raise SpecError("hang_after", f"after={self.after}, warmup={self.warmup}, "
                            f"idle_cpu_pct={self.idle_cpu_pct}: give after > 0, warmup >= 0, "
                            "idle 0..100")


def hang_line(quiet_s: float) -> str:
    """``no progress on any rank for 7 min: Stacks?``"""
    minutes = int(quiet_s // 60)
    span = f"{minutes} min" if minutes >= 1 else f"{int(quiet_s)} s"
    return f"no progress on any rank for {span}: Stacks?"


class HangWatch:
    """One job's quiet time: :meth:`feed` at each rank poll returns the line while it looks
    hung, else None."""

    def __init__(self, rule: HangRule | None = None) -> None:
        self.rule = rule or HangRule()
        self._running_since: float | None = None
        self._progress_at: float | None = None
        self._log_bytes: int | None = None
        self._ranks: tuple[tuple[int, float | None], ...] = ()

    def feed(self, now: float, ranks: Sequence[RankState], log_bytes: int | None) -> str | None:
        """``ranks``: every rank's state now; ``log_bytes``: how much of the log has been read
        (None: nobody follows it)."""
        if not ranks or any(r.phase is not RankPhase.RUNNING for r in ranks):
            self._running_since = self._progress_at = None
            return None
        # a rank that started again (a requeue) is a new run: its start counts as progress
        starts = tuple(sorted((r.rank, r.started_at) for r in ranks))
        if self._running_since is None or starts != self._ranks:
            self._running_since = self._progress_at = now
            self._ranks = starts
            self._log_bytes = log_bytes
            return None
        assert self._progress_at is not None
        if log_bytes is not None and log_bytes != self._log_bytes:
            self._progress_at = now
        self._log_bytes = log_bytes if log_bytes is not None else self._log_bytes
        samples = [r.usage for r in ranks]
        if any(u is None for u in samples):  # the CPU cannot tell: no verdict
            self._progress_at = now
            return None
        if any(u is not None and u.cpu_pct >= self.rule.idle_cpu_pct for u in samples):
            self._progress_at = now
        if log_bytes is None:
            return None
        quiet = now - self._progress_at
        if quiet >= self.rule.after and now - self._running_since >= self.rule.warmup:
            return hang_line(quiet)
        return None
