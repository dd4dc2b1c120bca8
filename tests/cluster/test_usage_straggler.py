"""Per-rank resource use and the straggler on the real Slurm cluster (issue 28 items 1 and 2).

A 4-node x 2-rank job where rank 3 sleeps on every step and rank 5 holds 300 MiB: job.usage()
shows rank 5's RSS above every other rank's, the watcher names rank 3 (and its node) as the
straggler in the status the views' header shows, and the name clears once rank 3 catches up.
Nothing here asks slurmctld more than the watcher already does: the samples ride along with the
rank-state query (no sstat). No timed assertions: every wait is on a condition, generously."""

from __future__ import annotations

import textwrap
from dataclasses import replace

from jupyter_tiers.app.viewstate.job import status_traits
from jupyter_tiers.batch.straggler import StragglerRule
from jupyter_tiers.core.model import JobState, JobStatus, RankPhase
from jupyter_tiers.engine.subscription import wait_for
from jupyter_tiers.slurm.tier import SlurmTier

SLOW, EATER = 3, 5

BODY = textwrap.dedent(f"""\
    import os, time
    rank = int(os.environ["RANK"])
    jobdir = os.environ["JT_JOB_DIR"]
    block = None
    if rank == {EATER}:
        block = bytearray(300 * 1024 * 1024)
        for i in range(0, len(block), 4096):
            block[i] = 1  # touched: resident
    step = 0
    while not os.path.exists(os.path.join(jobdir, "stop")):
        sum(range(20000))  # a step's work
        if rank == {SLOW} and not os.path.exists(os.path.join(jobdir, "fast")):
            time.sleep(0.3)  # the straggler: waits on every step
        step += 1
        if step % 200 == 0:
            print(f"step={{step}}", flush=True)
    print("done", step, flush=True)
    """)


def _touch(box: SlurmTier, jobdir: str, name: str) -> None:
    box.transport.run(["touch", f"{jobdir}/{name}"], timeout=120)


def test_usage_and_straggler_on_4x2(box: SlurmTier) -> None:
    # Short thresholds for a test (defaults: 60 s window and hold, 3 min warm-up).
    box.watcher.straggler_rule = StragglerRule(window=20, margin=0.3, hold=10, warmup=10, floor=0.005)
    spec = box.make_spec(BODY, name="usage-straggler", nodes=4, ntasks_per_node=2)
    # A beat a second (default 10 s), as a profile's setup line would set it (JT_* is not --env's).
    job = box.submit(replace(spec, setup=(*spec.setup, "export JT_HEARTBEAT=1")))
    jobdir = job.record.jobdir
    try:
        with job.watch() as sub:
            running = wait_for(sub, lambda s: s.state is JobState.RUNNING and len(s.ranks) == 8 and all(
                r.phase is RankPhase.RUNNING and r.usage is not None for r in s.ranks), timeout=300)
            assert running is not None and running.state is JobState.RUNNING, running

            # item 1: the eater's RSS stands out in the latest samples and in job.usage()
            fat = wait_for(sub, lambda s: _rss_mib(s, EATER) > 250, timeout=300)
            assert fat is not None and _rss_mib(fat, EATER) > 250, fat
            assert all(_rss_mib(fat, r.rank) < 200 for r in fat.ranks if r.rank != EATER)
            rows = job.usage()
            rows = rows.to_dict("records") if hasattr(rows, "to_dict") else rows
            assert {r["rank"] for r in rows} == set(range(8))
            peak = {k: max(r["rss_mib"] for r in rows if r["rank"] == k) for k in range(8)}
            assert peak[EATER] > 250 and max(v for k, v in peak.items() if k != EATER) < 200, peak
            assert {r["node"] for r in rows} == {"node1", "node2", "node3", "node4"}
            assert all(r["gpu_util"] is None for r in rows)  # no nvidia-smi here: CPU only
            eater_node = next(r.node for r in fat.ranks if r.rank == EATER)
            traits = status_traits(fat)
            assert traits["ranks"][EATER][4][1] > 250  # the grid's cell: [cpu %, RSS MiB, ...]
            assert traits["node_usage"][eater_node][1] > 250  # the node row's total

            # item 2: the sleeping rank is named, with its node, in the header's line
            named = wait_for(sub, lambda s: (s.straggler or "").startswith(f"rank {SLOW} "), timeout=600)
            assert named is not None and named.straggler, named
            slow_node = next(r.node for r in named.ranks if r.rank == SLOW)
            assert named.straggler.startswith(f"rank {SLOW} ({slow_node}) "), named.straggler
            assert status_traits(named)["straggler"] == named.straggler

            # ... and cleared once it catches up
            _touch(box, jobdir, "fast")
            cleared = wait_for(sub, lambda s: s.state is JobState.RUNNING and not s.straggler, timeout=600)
            assert cleared is not None and cleared.straggler is None, cleared
    finally:
        _touch(box, jobdir, "stop")
    final = job.wait(timeout=300)
    assert final.state is JobState.COMPLETED, final
    assert final.straggler is None


def _rss_mib(status: JobStatus, rank: int) -> float:
    for r in status.ranks:
        if r.rank == rank and r.usage is not None:
            return r.usage.rss_kib / 1024
    return 0.0
