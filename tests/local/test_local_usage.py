"""Per-rank resource use and the straggler on the local tier (the same rank shim as on Slurm):
a 2 x 2 job where rank 1 holds 200 MiB and rank 2 sleeps: the ranks' latest samples in the
status, job.usage() rows, and the watcher naming rank 2. No timed assertions."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from jupyter_tiers.batch.straggler import StragglerRule
from jupyter_tiers.core.model import JobState, JobStatus, RankPhase
from jupyter_tiers.engine.subscription import wait_for
from jupyter_tiers.local.tier import LocalTier

GUARD = 300.0
BODY = textwrap.dedent("""\
    import os, time
    rank = int(os.environ["RANK"])
    stop = os.path.join(os.environ["JT_JOB_DIR"], "stop")
    block = bytearray(200 * 1024 * 1024) if rank == 1 else None
    if block is not None:
        for i in range(0, len(block), 4096):
            block[i] = 1
    while not os.path.exists(stop):
        if rank == 2:
            time.sleep(0.3)
        else:
            sum(range(20000))
    """)


@pytest.fixture(autouse=True)
def _heartbeat_each_second(monkeypatch: pytest.MonkeyPatch) -> None:
    """Samples each second for conftest's ``tier`` (its ranks keep JT_HEARTBEAT from here)."""
    monkeypatch.setenv("JT_HEARTBEAT", "1")


def _rss(status: JobStatus, rank: int) -> float:
    r = next((r for r in status.ranks if r.rank == rank), None)
    return r.usage.rss_kib / 1024 if r is not None and r.usage is not None else 0.0


def test_local_usage_and_straggler(tier: LocalTier) -> None:
    tier.watcher.straggler_rule = StragglerRule(window=10, hold=5, warmup=5, floor=0.005)
    job = tier.submit(tier.make_spec(BODY, name="usage", nodes=2, ntasks_per_node=2))
    try:
        with job.watch() as sub:
            fat = wait_for(sub, lambda s: _rss(s, 1) > 150 and all(
                r.phase is RankPhase.RUNNING and r.usage is not None for r in s.ranks), timeout=GUARD)
            assert fat is not None and _rss(fat, 1) > 150, fat
            assert max(_rss(fat, r) for r in (0, 2, 3)) < 100
            named = wait_for(sub, lambda s: (s.straggler or "").startswith("rank 2 (local1) "), timeout=GUARD)
            assert named is not None and (named.straggler or "").startswith("rank 2 (local1) "), named
        rows = job.usage()
        rows = rows.to_dict("records") if hasattr(rows, "to_dict") else rows
        assert {r["rank"] for r in rows} == {0, 1, 2, 3}
        assert {r["node"] for r in rows} == {"local0", "local1"}
        assert max(r["rss_mib"] for r in rows if r["rank"] == 1) > 150
        one = job.usage(rank=2)
        one = one.to_dict("records") if hasattr(one, "to_dict") else one
        assert one and {r["rank"] for r in one} == {2}
    finally:
        Path(job.record.jobdir, "stop").write_text("")
    assert job.wait(timeout=GUARD).state is JobState.COMPLETED
