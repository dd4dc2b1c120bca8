"""Round-robin choice among the ready replicas of a local service (pure, thread-safe)."""

from __future__ import annotations

import threading
from collections.abc import Sequence


class RoundRobin:
    """Hands out the ready backends in turn. The set of backends changes under it (replicas
    come, go, become ready or not): the turn moves on from the last backend handed out, so a
    change never sends two connections in a row to the same backend while others are ready."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._backends: tuple[int, ...] = ()
        self._last: int | None = None

    def set_backends(self, backends: Sequence[int]) -> None:
        """Replace the ready backends (ports), in a stable order."""
        with self._lock:
            self._backends = tuple(sorted(set(backends)))

    @property
    def backends(self) -> tuple[int, ...]:
        with self._lock:
            return self._backends

    def pick(self) -> int | None:
        """The next backend, or None when none is ready."""
        with self._lock:
            if not self._backends:
                return None
            after = [b for b in self._backends if self._last is not None and b > self._last]
            choice = after[0] if after else self._backends[0]
            self._last = choice
            return choice

    def order(self) -> list[int]:
        """Every ready backend once, starting with the next in turn (to try another when one
        refuses the connection)."""
        first = self.pick()
        if first is None:
            return []
        with self._lock:
            backends = self._backends
        i = backends.index(first) if first in backends else 0
        return list(backends[i:] + backends[:i])
