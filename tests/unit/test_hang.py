"""A job that looks hung (batch/hang.py), over synthetic timelines with an injected clock: said
after the quiet time, cleared by any progress, never in the first minutes, never while a rank is
busy, without every rank's sample or while nobody reads the log. Also the profile key's row."""

from __future__ import annotations

import pytest

from jupyter_tiers.batch.hang import HangRule, HangWatch, hang_line
from jupyter_tiers.config.profiles import TIER_KEYS
from jupyter_tiers.config.project_trust import PROJECT_KEYS
from jupyter_tiers.core.errors import SpecError
from jupyter_tiers.core.model import RankPhase, RankState, RankUsage

RULE = HangRule(after=300, warmup=180, idle_cpu_pct=10)


def ranks(cpu: dict[int, float | None], phase: RankPhase = RankPhase.RUNNING,
          started: float = 0.0) -> list[RankState]:
    return [RankState(rank=r, phase=phase, node="n1", started_at=started,
                      usage=None if pct is None else RankUsage(at=0.0, cpu_s=0.0, cpu_pct=pct, rss_kib=1))
            for r, pct in cpu.items()]


IDLE = {0: 0.5, 1: 1.0, 2: 0.0, 3: 2.0}


def run(watch: HangWatch, timeline: list[tuple[float, list[RankState], int | None]]) -> list[str | None]:
    return [watch.feed(t, rs, log) for t, rs, log in timeline]


def test_quiet_idle_ranks_are_said_once_the_quiet_time_passed_and_cleared_by_a_log_line() -> None:
    watch = HangWatch(RULE)
    said = run(watch, [(t, ranks(IDLE), 1000) for t in range(0, 600, 30)])
    first = said.index(next(s for s in said if s))
    assert all(s is None for s in said[:first]) and first * 30 == 300  # quiet for 5 min
    assert said[first] == "no progress on any rank for 5 min: Stacks?"
    assert said[-1] == "no progress on any rank for 9 min: Stacks?"
    assert watch.feed(600, ranks(IDLE), 1100) is None  # a new line: cleared at once
    assert watch.feed(870, ranks(IDLE), 1100) is None
    assert watch.feed(900, ranks(IDLE), 1100) == "no progress on any rank for 5 min: Stacks?"


def test_never_in_the_first_minutes() -> None:
    watch = HangWatch(HangRule(after=60, warmup=180))
    said = run(watch, [(t, ranks(IDLE), 5) for t in range(0, 240, 10)])
    assert all(s is None for s in said[:18]) and said[18] == "no progress on any rank for 3 min: Stacks?"


def test_never_while_a_rank_is_busy() -> None:
    watch = HangWatch(RULE)
    busy = {**IDLE, 3: 98.0}  # one rank computes (or spins in a collective)
    assert all(s is None for s in run(watch, [(t, ranks(busy), 7) for t in range(0, 3600, 60)]))
    # it goes idle too: the quiet time counts from the last poll that saw it busy (t=3540)
    assert watch.feed(3600, ranks(IDLE), 7) is None
    assert watch.feed(3540 + 299, ranks(IDLE), 7) is None
    assert watch.feed(3540 + 300, ranks(IDLE), 7) == hang_line(300)


def test_no_verdict_without_every_sample_or_without_the_log() -> None:
    unsampled = HangWatch(RULE)
    partly = {**IDLE, 2: None}
    assert all(s is None for s in run(unsampled, [(t, ranks(partly), 7) for t in range(0, 3600, 60)]))
    unread = HangWatch(RULE)
    assert all(s is None for s in run(unread, [(t, ranks(IDLE), None) for t in range(0, 3600, 60)]))
    # someone starts reading the log: its first offset is news, then the quiet time counts
    assert unread.feed(3600, ranks(IDLE), 50) is None
    assert unread.feed(3900, ranks(IDLE), 50) == hang_line(300)


def test_a_rank_not_running_or_started_again_starts_over() -> None:
    watch = HangWatch(RULE)
    run(watch, [(t, ranks(IDLE), 7) for t in range(0, 600, 60)])
    assert watch.feed(600, ranks(IDLE), 7) is not None
    ended = ranks(IDLE)
    ended[1] = RankState(rank=1, phase=RankPhase.EXITED, exit_code=0)
    assert watch.feed(630, ended, 7) is None
    assert watch.feed(660, ranks(IDLE), 7) is None  # all running again: a fresh start
    assert watch.feed(660 + 299, ranks(IDLE), 7) is None
    assert watch.feed(660 + 300, ranks(IDLE), 7) is not None
    requeued = ranks(IDLE, started=5000.0)  # the same ranks, a new run
    assert watch.feed(1000, requeued, 7) is None


def test_the_line_and_the_rule() -> None:
    assert hang_line(7 * 60 + 59) == "no progress on any rank for 7 min: Stacks?"
    assert hang_line(45) == "no progress on any rank for 45 s: Stacks?"
    with pytest.raises(SpecError):
        HangRule(after=0)
    with pytest.raises(SpecError):
        HangRule(idle_cpu_pct=0)


def test_hang_after_is_a_profile_key_with_an_allowlist_row() -> None:
    assert "hang_after" in TIER_KEYS["slurm"] and "hang_after" in TIER_KEYS["local"]
    row = PROJECT_KEYS["hang_after"]
    assert not row.on_trusted and not row.on_own  # how this machine polls: the user's own files
