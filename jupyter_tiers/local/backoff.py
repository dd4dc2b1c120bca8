"""Kubelet-like restart back-off for the replicas of a local service (pure: the caller passes
the clock).

A replica that exits is restarted after 10 s, then 20 s, 40 s, ... at most 5 minutes; a replica
that ran 10 minutes before exiting starts over at 10 s (the kubelet's CrashLoopBackOff).
"""

from __future__ import annotations

from dataclasses import dataclass

BASE_S = 10.0
CAP_S = 300.0
RESET_AFTER_S = 600.0


def delay_for(crashes: int, base: float = BASE_S, cap: float = CAP_S) -> float:
    """The wait before restarting after the ``crashes``-th consecutive exit (1-based)."""
    if crashes <= 0:
        return 0.0
    # 2**n grows past any cap long before it overflows a float; stop doubling at the cap.
    delay = base
    for _ in range(crashes - 1):
        delay *= 2
        if delay >= cap:
            return cap
    return min(delay, cap)


@dataclass
class BackOff:
    """The restart back-off of one replica: call :meth:`exited` each time its process ends."""

    crashes: int = 0  # consecutive exits since the last reset
    base: float = BASE_S
    cap: float = CAP_S
    reset_after: float = RESET_AFTER_S

    def exited(self, started_at: float, now: float) -> float:
        """Record an exit of a process started at ``started_at``; returns when to restart it."""
        if now - started_at >= self.reset_after:
            self.crashes = 0
        self.crashes += 1
        return now + delay_for(self.crashes, self.base, self.cap)

    def message(self, pod: str) -> str:
        """The kubelet's words for the current wait."""
        seconds = int(delay_for(self.crashes, self.base, self.cap))
        shown = f"{seconds // 60}m{seconds % 60}s" if seconds >= 60 else f"{seconds}s"
        return f"back-off {shown} restarting failed container=server pod={pod}"
