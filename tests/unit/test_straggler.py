"""The straggler (batch/straggler.py): named once it lags for long enough, not during warm-up,
not for one rank, not while everyone idles, cleared once it catches up; seeded fuzz."""

from __future__ import annotations

import math
import random

import pytest

from jupyter_tiers.batch.straggler import Straggler, StragglerRule, StragglerWatch, find_straggler
from jupyter_tiers.core.model import RankPhase, RankState, RankUsage

RULE = StragglerRule(window=60, margin=0.3, hold=60, warmup=180, floor=0.05)


Series = dict[int, list[tuple[float, float]]]


def cpu_series(rates: dict[int, float], until: float, beat: float = 10.0,
               slow_from: float = 0.0, slow: dict[int, float] | None = None) -> Series:
    """Each rank's CPU seconds sampled every ``beat`` s from 0 to ``until``; after ``slow_from``
    the ranks in ``slow`` run at that rate instead."""
    out: dict[int, list[tuple[float, float]]] = {}
    for rank, rate in rates.items():
        pts, v, t = [], 0.0, 0.0
        while t <= until:
            pts.append((t, v))
            r = (slow or {}).get(rank, rate) if t >= slow_from else rate
            v += r * beat
            t += beat
        out[rank] = pts
    return out


def test_a_slow_rank_is_named_with_its_node_and_margin() -> None:
    series = cpu_series({0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0}, until=600, slow_from=300, slow={3: 0.6})
    found = find_straggler(series, 0.0, {3: "node12"}, rule=RULE, basis="CPU time")
    assert found is not None and found.rank == 3 and found.node == "node12"
    assert found.slower_pct == 40
    # lagging by the full margin from one window after it slowed down, until the end
    assert 300 <= found.since <= 360 and found.now == 600
    assert found.text().startswith("rank 3 (node12) 40 % slower than the median for ")
    assert found.text().endswith(" min (CPU time)")


def test_not_named_before_it_held_for_hold_seconds() -> None:
    series = cpu_series({0: 1.0, 1: 1.0, 2: 1.0}, until=390, slow_from=330, slow={1: 0.2})
    assert find_straggler(series, 0.0, rule=RULE) is None
    series = cpu_series({0: 1.0, 1: 1.0, 2: 1.0}, until=480, slow_from=330, slow={1: 0.2})
    assert find_straggler(series, 0.0, rule=RULE).rank == 1


def test_no_alarm_during_warmup() -> None:
    series = cpu_series({0: 1.0, 1: 0.1, 2: 1.0}, until=170)
    assert find_straggler(series, 0.0, rule=RULE) is None
    # the same ranks long after their start
    series = cpu_series({0: 1.0, 1: 0.1, 2: 1.0}, until=400)
    assert find_straggler(series, 0.0, rule=RULE).rank == 1
    assert find_straggler(series, None, rule=RULE) is None  # start unknown: nothing


def test_single_rank_job_never() -> None:
    assert find_straggler(cpu_series({0: 0.01}, until=3600), 0.0, rule=RULE) is None
    assert find_straggler({}, 0.0, rule=RULE) is None


def test_everyone_idle_is_not_a_straggler() -> None:
    series = cpu_series({0: 0.01, 1: 0.0, 2: 0.02}, until=900)
    assert find_straggler(series, 0.0, rule=RULE) is None


def test_idle_while_others_work() -> None:
    series = cpu_series({0: 2.0, 1: 2.0, 2: 0.0, 3: 2.0}, until=900)
    found = find_straggler(series, 0.0, {2: "n3"}, rule=RULE, basis="CPU time")
    assert found.rank == 2 and found.slower_pct == 100
    assert found.text().startswith("rank 2 (n3) idle while the others work for ")


def test_the_worst_of_two_laggards_is_named() -> None:
    series = cpu_series({i: 1.0 for i in range(6)}, until=900, slow_from=200, slow={1: 0.5, 4: 0.3})
    assert find_straggler(series, 0.0, rule=RULE).rank == 4


def test_clears_once_caught_up_and_not_flickering_at_the_threshold() -> None:
    watch = StragglerWatch(RULE)
    rates = {0: 1.0, 1: 1.0, 2: 1.0}
    v = dict.fromkeys(rates, 0.0)
    named_at: list[tuple[float, int | None]] = []
    for step in range(121):
        t = step * 10.0
        # rank 2: slow (0.5) from 300 s to 700 s, then at 0.8 (within half the margin), then 1.0
        r2 = 0.5 if 300 <= t < 700 else 0.8 if 700 <= t < 1000 else 1.0
        found = watch.feed({r: (t, v[r]) for r in rates}, 0.0)
        named_at.append((t, found.rank if found else None))
        v[0] += 10.0
        v[1] += 10.0
        v[2] += r2 * 10.0
    named = [t for t, r in named_at if r == 2]
    assert named and min(named) >= 360
    # at 0.8 it lags 20 %, under the margin but over half of it: still named (no flicker) ...
    assert any(700 < t < 1000 for t in named)
    # ... and at full speed it clears
    assert named_at[-1] == (1200.0, None) and watch.named is None


def test_a_rank_that_ends_is_forgotten() -> None:
    watch = StragglerWatch(StragglerRule(window=20, hold=20, warmup=0))
    for step in range(20):
        t = step * 5.0
        watch.feed({0: (t, t), 1: (t, t), 2: (t, t * 0.1)}, 0.0)
    assert watch.named is not None and watch.named.rank == 2
    assert watch.feed({0: (100.0, 100.0), 1: (100.0, 100.0)}, 0.0) is None


def test_feed_ranks_uses_running_ranks_usage() -> None:
    watch = StragglerWatch(StragglerRule(window=20, hold=20, warmup=10))

    def ranks(t: float) -> list[RankState]:
        return [RankState(rank=i, phase=RankPhase.RUNNING, node=f"node{i // 2 + 1}", started_at=0.0,
                          usage=RankUsage(at=t, cpu_s=t * (0.2 if i == 3 else 1.0), cpu_pct=0, rss_kib=0))
                for i in range(4)] + [RankState(rank=4, phase=RankPhase.EXITED, started_at=0.0)]

    found = None
    for step in range(30):
        found = watch.feed_ranks(ranks(step * 2.0))
    assert isinstance(found, Straggler) and found.rank == 3 and found.node == "node2"
    # a rank whose usage has not come yet: no start for everyone known, nothing named
    lone = [RankState(rank=0, phase=RankPhase.RUNNING, usage=RankUsage(1, 1, 1, 1))]
    assert StragglerWatch().feed_ranks(lone) is None


def test_restarted_rank_starts_over() -> None:
    watch = StragglerWatch(StragglerRule(window=20, hold=10, warmup=0))
    for step in range(20):
        t = step * 2.0
        watch.feed({0: (t, t), 1: (t, t), 2: (t, 1000 + t)}, 0.0)  # rank 2's progress falls back next
    assert watch.feed({0: (40.0, 40.0), 1: (40.0, 40.0), 2: (40.0, 0.0)}, 0.0) is None


@pytest.mark.parametrize("bad", [{"window": 0}, {"margin": 1.5}, {"margin": 0}, {"hold": -1},
                                 {"floor": math.nan}, {"warmup": math.inf}])
def test_rule_checks_its_numbers(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="straggler rule"):
        StragglerRule(**bad)


def test_durations_in_words() -> None:
    s = Straggler(rank=1, node=None, slower_pct=38, since=0, now=45, basis="steps")
    assert s.text() == "rank 1 38 % slower than the median for 45 s (steps)"
    assert "for 2 min" in Straggler(1, None, 38, 0, 120, "steps").text()
    assert "for 2.0 h" in Straggler(1, None, 38, 0, 7200, "steps").text()


@pytest.mark.parametrize("seed", range(200))
def test_fuzz_find_straggler(seed: int) -> None:
    rng = random.Random(seed)
    series: dict[int, list[tuple[float, float]]] = {}
    specials = [math.nan, math.inf, -math.inf, -1.0, 0.0, 1e308]
    for rank in range(rng.randint(0, 6)):
        pts = []
        for _ in range(rng.randint(0, 40)):
            t = rng.choice(specials) if rng.random() < 0.05 else rng.uniform(-50, 1000)
            v = rng.choice(specials) if rng.random() < 0.05 else rng.uniform(-10, 500)
            pts.append((t, v))
        series[rank] = pts
    rule = StragglerRule(window=rng.uniform(0.1, 200), margin=rng.uniform(0.01, 0.99),
                         hold=rng.uniform(0, 200), warmup=rng.uniform(0, 300), floor=rng.uniform(0, 1))
    found = find_straggler(series, rng.choice([None, 0.0, rng.uniform(-100, 500)]), rule=rule)
    if found is not None:
        assert found.rank in series and 0 <= found.slower_pct <= 100
        assert found.now - found.since >= rule.hold
        assert isinstance(found.text(), str)
