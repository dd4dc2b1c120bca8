"""The straggler: the rank that lags the others by a wide margin, named once (pure, no I/O).

Input is each rank's progress over time, a rising quantity: its CPU seconds (the rank shim's
usage samples, usage.py) or its step (metric lines). At each instant the progress moves on, each
rank's rate over the last ``window`` seconds is compared with the median rate of the ranks; a
rank whose rate stays at least ``margin`` below the median for ``hold`` seconds is the
straggler ("rank 93 (node12) 38 % slower than the median for 2 min"). One rank is named, the
one lagging most. Nothing is named for single-rank jobs, within ``warmup`` seconds of the last
rank's start (start-up and compilation differ between ranks), or while the median itself barely
moves (everyone idle: nothing to lag behind). The name clears once the rank is back within half
the margin (no flicker around the threshold).

:class:`StragglerWatch` is fed as samples arrive (the watcher, once per rank poll: a few
comparisons per rank, each rank's samples bounded to the window); :func:`find_straggler` replays
whole series through it.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..core.model import RankPhase, RankState


@dataclass(frozen=True)
class StragglerRule:
    """The thresholds: rates over ``window`` s, ``margin`` (0..1) below the median for ``hold``
    s, not in the first ``warmup`` s, nor while the median rate is at most ``floor``."""

    window: float = 60.0
    margin: float = 0.30
    hold: float = 60.0
    warmup: float = 180.0
    floor: float = 0.05  # CPU seconds a second: below it the ranks are idle, not lagging

    def __post_init__(self) -> None:
        for name in ("window", "margin", "hold", "warmup", "floor"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"straggler rule: {name} must be a finite number >= 0, not {value!r}")
        if self.window <= 0 or not 0 < self.margin < 1:
            raise ValueError("straggler rule: window must be > 0 and margin between 0 and 1")


@dataclass(frozen=True)
class Straggler:
    """The rank named: how much slower than the median, since when, and by what measure."""

    rank: int
    node: str | None
    slower_pct: int
    since: float
    now: float
    basis: str  # "CPU time" or "steps"

    def text(self) -> str:
        """``rank 3 (node2) 38 % slower than the median for 2 min (CPU time)``."""
        where = f" ({self.node})" if self.node else ""
        how = ("idle while the others work" if self.slower_pct >= 95
               else f"{self.slower_pct} % slower than the median")
        return f"rank {self.rank}{where} {how} for {_duration(self.now - self.since)} ({self.basis})"


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{int(seconds)} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def _median(values: Sequence[float]) -> float:
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


@dataclass
class _Series:
    times: deque[float] = field(default_factory=deque)
    values: deque[float] = field(default_factory=deque)

    def add(self, t: float, v: float) -> None:
        if self.times and t <= self.times[-1]:
            return  # the same sample read again (or a clock step back): nothing new
        if self.values and v < self.values[-1]:  # a restarted rank: its progress starts over
            self.times.clear()
            self.values.clear()
        self.times.append(t)
        self.values.append(v)

    def trim(self, before: float) -> None:
        """Forget samples older than ``before``, keeping one at or before it (interpolation)."""
        while len(self.times) >= 2 and self.times[1] <= before:
            self.times.popleft()
            self.values.popleft()

    def at(self, t: float) -> float | None:
        """The progress at ``t`` by linear interpolation (None outside the samples)."""
        times = self.times
        if not times or t < times[0] or t > times[-1]:
            return None
        i = bisect.bisect_left(times, t)
        if times[i] == t:
            return self.values[i]
        t0, t1, v0, v1 = times[i - 1], times[i], self.values[i - 1], self.values[i]
        return v0 + (v1 - v0) * (t - t0) / (t1 - t0)


class StragglerWatch:
    """The straggler of one job, fed as its samples arrive (see the module docstring)."""

    def __init__(self, rule: StragglerRule | None = None, basis: str = "CPU time") -> None:
        self.rule = rule or StragglerRule()
        self.basis = basis
        self._series: dict[int, _Series] = {}
        self._lagging: dict[int, float] = {}  # rank -> since when it lags
        self._named: Straggler | None = None
        self._now: float | None = None

    @property
    def named(self) -> Straggler | None:
        """The straggler as of the last feed, or None."""
        return self._named

    def feed(self, samples: Mapping[int, tuple[float, float]], started_at: float | None,
             nodes: Mapping[int, str | None] | None = None) -> Straggler | None:
        """The latest ``(time, progress)`` of each running rank (ranks not in ``samples`` have
        ended: they are forgotten); ``started_at``, when the last rank started (None: unknown,
        nothing is named). Returns the straggler now, or None."""
        for rank in list(self._series):
            if rank not in samples:
                del self._series[rank]
                self._lagging.pop(rank, None)
        for rank, (t, v) in samples.items():
            if math.isfinite(t) and math.isfinite(v):
                self._series.setdefault(rank, _Series()).add(t, v)
        live = {r: s for r, s in self._series.items() if s.times}
        if len(live) < 2 or started_at is None:
            self._lagging.clear()
            self._named = None
            return None
        now = min(s.times[-1] for s in live.values())  # every rank has a sample up to here
        rule = self.rule
        for s in live.values():
            s.trim(now - rule.window)
        if self._now is not None and now <= self._now:
            return self._renamed(nodes)
        self._now = now
        rates: dict[int, float] = {}
        for rank, s in live.items():
            a, b = s.at(now - rule.window), s.at(now)
            if a is not None and b is not None:
                rates[rank] = (b - a) / rule.window
        med = _median(list(rates.values())) if len(rates) >= 2 else 0.0
        if now < started_at + rule.warmup or len(rates) < 2 or med <= rule.floor or med <= 0:
            self._lagging.clear()
            self._named = None
            return None
        lags = {rank: 1 - rate / med for rank, rate in rates.items()}
        for rank in list(self._lagging):
            named = self._named is not None and self._named.rank == rank
            if lags.get(rank, 0.0) < (rule.margin / 2 if named else rule.margin):
                del self._lagging[rank]
        for rank, lag in lags.items():
            if lag >= rule.margin:
                self._lagging.setdefault(rank, now)
        held = [(lags[r], -r) for r, since in self._lagging.items() if now - since >= rule.hold]
        if not held:
            self._named = None
            return None
        _, neg = max(held)
        rank = -neg
        self._named = Straggler(rank=rank, node=(nodes or {}).get(rank),
                                slower_pct=min(100, round(100 * lags[rank])),
                                since=self._lagging[rank], now=now, basis=self.basis)
        return self._named

    def _renamed(self, nodes: Mapping[int, str | None] | None) -> Straggler | None:
        if self._named is not None and nodes and nodes.get(self._named.rank) != self._named.node:
            self._named = Straggler(rank=self._named.rank, node=nodes.get(self._named.rank),
                                    slower_pct=self._named.slower_pct, since=self._named.since,
                                    now=self._named.now, basis=self._named.basis)
        return self._named

    def feed_ranks(self, ranks: Sequence[RankState]) -> Straggler | None:
        """:meth:`feed` from a job's rank states: the running ranks' usage samples (CPU
        seconds), started at the last rank's start."""
        samples: dict[int, tuple[float, float]] = {}
        nodes: dict[int, str | None] = {}
        starts: list[float] = []
        for r in ranks:
            if r.phase is not RankPhase.RUNNING or r.usage is None:
                continue
            samples[r.rank] = (r.usage.at, r.usage.cpu_s)
            nodes[r.rank] = r.node
            if r.started_at is not None:
                starts.append(r.started_at)
        started = max(starts) if starts and len(starts) == len(samples) else None
        return self.feed(samples, started, nodes)


def find_straggler(series: Mapping[int, Sequence[tuple[float, float]]], started_at: float | None,
                   nodes: Mapping[int, str | None] | None = None, *,
                   rule: StragglerRule | None = None, basis: str = "steps") -> Straggler | None:
    """The straggler at the end of ``series`` (rank -> ``(time, progress)`` samples, any order):
    every sample replayed through a :class:`StragglerWatch` in time order. Samples that are not
    finite numbers are skipped."""
    watch = StragglerWatch(rule, basis)
    events: list[tuple[float, int, float]] = []
    for rank, pts in series.items():
        for t, v in pts:
            if isinstance(t, (int, float)) and isinstance(v, (int, float)) and math.isfinite(t) \
                    and math.isfinite(v):
                events.append((float(t), rank, float(v)))
    events.sort()
    latest: dict[int, tuple[float, float]] = {}
    result: Straggler | None = None
    for i, (t, rank, v) in enumerate(events):
        latest[rank] = (t, v)
        if i + 1 == len(events) or events[i + 1][0] != t:
            result = watch.feed(latest, started_at, nodes)
    return result
