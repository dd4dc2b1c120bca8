"""pure: what a view says while its cluster does not answer.

Reconnects back off exponentially with jitter, capped (``backoff_delay``), and say so in words
(``reconnecting``: "reconnecting (attempt 3, next in 8 s)"). A state last seen longer ago than
the profile's ``stale_after`` (default 5 min) is no longer shown as current: it becomes UNKNOWN
with the last seen state and when (``last_seen``), never a confident RUNNING or READY.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from typing import Any

#: The profile key, and its default in seconds.
STALE_AFTER_KEY = "stale_after"
STALE_AFTER_S = 300.0


def stale_after(settings: Mapping[str, Any] | None) -> float:
    """The profile's ``stale_after`` in seconds (validated by config/profiles.py), else the default."""
    value = (settings or {}).get(STALE_AFTER_KEY)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else STALE_AFTER_S


def backoff_delay(attempt: int, *, base: float, cap: float, jitter: float = 0.2,
                  uniform: Callable[[], float] = random.random) -> float:
    """The wait before reconnect ``attempt`` (1, 2, ...): ``base`` doubled per attempt, at most
    ``cap``, less a random fraction up to ``jitter`` of it (so that many clients cut at the same
    moment do not come back in step). Never more than ``cap``, never less than 0."""
    raw = min(cap, base * 2 ** max(0, min(attempt - 1, 60)))
    return max(0.0, raw * (1.0 - jitter * uniform()))


def reconnecting(attempt: int, delay: float) -> str:
    """``reconnecting (attempt 3, next in 8 s)``."""
    return f"reconnecting (attempt {attempt}, next in {max(0, round(delay))} s)"


def ago(seconds: float) -> str:
    """``45 s``, ``6 min``, ``2 h 5 min``."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60} min"


def is_stale(down_since: float | None, now: float, limit: float) -> bool:
    """Whether a cluster unreachable since ``down_since`` (None: reachable) has been so for
    longer than ``limit`` seconds."""
    return down_since is not None and now - down_since > limit


def last_seen(state: str, seen_at: float, now: float) -> str:
    """``last seen RUNNING 6 min ago (at 14:02 UTC)``: the reason of an UNKNOWN state."""
    clock = time.strftime("%H:%M UTC", time.gmtime(seen_at))
    return f"last seen {state} {ago(now - seen_at)} ago (at {clock}); the cluster does not answer"
