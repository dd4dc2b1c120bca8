"""Reconnect back-off with jitter and its words, the stale_after profile key, and rows of a
cluster gone quiet for too long shown UNKNOWN (last seen) in `%tiers jobs` and the sidebar's list."""

from __future__ import annotations

import random

import pytest

from jupyter_tiers.app.actions import item_from, mark_stale
from jupyter_tiers.config.profiles import validate_profile
from jupyter_tiers.config.registry import JobRecord
from jupyter_tiers.core import reachability as rc
from jupyter_tiers.core.errors import ConfigError
from jupyter_tiers.faces.tiers_command import format_jobs


def test_backoff_doubles_capped_and_jitters_down_only() -> None:
    rng = random.Random(18)
    for _ in range(2000):  # seeded fuzz over attempts, bases, caps and jitters
        attempt, base, cap = rng.randint(-3, 500), rng.uniform(0.01, 5), rng.uniform(0.01, 60)
        jitter = rng.uniform(0, 1)
        delay = rc.backoff_delay(attempt, base=base, cap=cap, jitter=jitter, uniform=rng.random)
        plain = min(cap, base * 2 ** max(0, min(attempt - 1, 60)))
        assert (1 - jitter) * plain - 1e-9 <= delay <= plain + 1e-9
    assert [rc.backoff_delay(n, base=2, cap=30, jitter=0) for n in range(1, 7)] == [2, 4, 8, 16, 30, 30]


def test_words() -> None:
    assert rc.reconnecting(3, 7.6) == "reconnecting (attempt 3, next in 8 s)"
    assert rc.reconnecting(1, -1) == "reconnecting (attempt 1, next in 0 s)"
    assert [rc.ago(s) for s in (0, 59, 60, 361, 7300)] == ["0 s", "59 s", "1 min", "6 min", "2 h 1 min"]
    assert rc.last_seen("RUNNING", 0.0, 360.0) == (
        "last seen RUNNING 6 min ago (at 00:00 UTC); the cluster does not answer")
    assert rc.is_stale(0.0, 301.0, 300.0) and not rc.is_stale(0.0, 300.0, 300.0)
    assert not rc.is_stale(None, 1e9, 300.0)


def test_stale_after_from_settings() -> None:
    assert rc.stale_after({"stale_after": 60}) == 60.0
    assert rc.stale_after({}) == rc.stale_after(None) == 300.0
    assert rc.stale_after({"stale_after": True}) == 300.0  # validated by config; never a bool


@pytest.mark.parametrize("tier", ["slurm", "kubernetes"])
def test_stale_after_is_a_profile_key_with_bounds(tier: str) -> None:
    base = {"tier": tier, "host": "h"} if tier == "slurm" else {"tier": tier}
    assert validate_profile("p", {**base, "stale_after": 120}, "tiers.yaml")["stale_after"] == 120
    with pytest.raises(ConfigError, match=r"profiles\.p\.stale_after: seconds from 10 to 604800, got 1"):
        validate_profile("p", {**base, "stale_after": 1}, "tiers.yaml")
    with pytest.raises(ConfigError, match=r"stale_after: expected an integer or a number, got str"):
        validate_profile("p", {**base, "stale_after": "5m"}, "tiers.yaml")


def _rec(job_id: str, state: str, *, profile: str = "hpc", kind: str = "job",
         at: float = 1000.0) -> JobRecord:
    return JobRecord(profile=profile, tier="slurm", job_id=job_id, name="t", state=state, kind=kind,
                     submitted_at=at, updated_at=at, world_size=2)


def test_rows_of_a_silent_cluster_turn_unknown_after_stale_after() -> None:
    records = [_rec("1", "RUNNING"), _rec("2", "COMPLETED"), _rec("3", "RUNNING", profile="other"),
               _rec("4", "READY", kind="service")]
    items = [item_from(r, None, 1000.0) for r in records]
    now = 1000.0 + 400
    same_records, same_items = mark_stale(records, items, {"hpc": 500.0}, {}, now)
    assert same_records == records and same_items == items  # not yet stale
    out_records, out_items = mark_stale(records, items, {"hpc": 300.0}, {}, now)
    assert [i.state for i in out_items] == ["UNKNOWN", "COMPLETED", "RUNNING", "UNKNOWN"]
    assert out_items[0].reason.startswith("last seen RUNNING 6 min ago (at ")
    assert out_items[0].summary.startswith("job 1 UNKNOWN — last seen RUNNING")
    assert out_items[3].summary.startswith("service 4 UNKNOWN — last seen READY")
    assert out_records[0].state == "UNKNOWN (last seen RUNNING 6 min ago)"
    table = format_jobs(out_records, now=now)
    assert "UNKNOWN (last seen RUNNING 6 min ago)" in table and " RUNNING " in table  # profile other
    # The tier answered a minute ago in this process: that is when the state was last confirmed.
    _, fresh = mark_stale(records, items, {"hpc": 300.0}, {"hpc": now - 60}, now)
    assert fresh[0].state == "RUNNING"


def test_paramikos_dropped_connection_record_does_not_reach_stderr() -> None:
    """Found by the chaos harness: each client-side cut printed paramiko's "Socket exception:
    Software caused connection abort (103)" on stderr (Python's last-resort handler), into
    whatever notebook cell ran then. A fresh interpreter with no logging configured."""
    import subprocess
    import sys

    code = ("import logging, jupyter_tiers.transport.connection; "
            "logging.getLogger('paramiko.transport').error('Socket exception: abort (103)')")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stderr == ""
    plain = subprocess.run([sys.executable, "-c", code.replace(", jupyter_tiers.transport.connection", "")],
                           capture_output=True, text=True, timeout=120)
    assert "Socket exception" in plain.stderr  # what it was before: the test can fail
