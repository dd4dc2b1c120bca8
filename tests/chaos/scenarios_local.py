"""Local-tier scenario: a job's supervisor SIGKILLed mid-job, then the job looked at again from a
new kernel (a fresh LocalTier on the same registry, as ``%tiers attach`` does).

Invariants: with nobody looking, no process of the job is left (its lifeline stopped them); the
reattached job says what happened (FAILED, the supervisor named); each rank's numbered lines up
to the kill are in its log once, in order. Recovery: from the kill to the job's last process gone.
"""

from __future__ import annotations

import json
import random
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

from jupyter_tiers.local.tier import LocalTier
from jupyter_tiers.model import JobState
from jupyter_tiers.registry import Registry
from tests.chaos.faults import kill
from tests.chaos.harness import Outcome, check_sequence, wait_until
from tests.helpers import local_profile, processes_mentioning

GUARD = 120.0
FAST = {"status_interval": 0.5, "rank_interval": 0.2, "first_poll": 0.1}
WRITER = 'i=0; while true; do echo "n $i"; i=$((i+1)); sleep 0.02; done'
NUMBER = re.compile(r"\bn (\d+)$")


def supervisor_kills(workdir: Path, *, seed: int, kills: int,
                     progress: Callable[[str], None] | None = None,
                     notes: list[str] | None = None) -> Outcome:
    """``kills`` jobs of 2 ranks, each one's supervisor SIGKILLed a seeded moment after start."""
    outcome = Outcome("local: supervisor SIGKILLed mid-job")
    rng = random.Random(seed)
    profile = local_profile(workdir / "jobs")
    registry = Registry(workdir / "registry.sqlite")
    tier = LocalTier(profile, registry, watcher_options=FAST)
    ran_on = 0
    try:
        for i in range(kills):
            job = tier.submit(tier.make_spec(WRITER, shell=True, nodes=2, name=f"chaos-{i}"))
            jobdir = job.record.jobdir
            if not wait_until(lambda j=job: len(j.logs(rank=1).splitlines()) > 5, GUARD, 0.1):
                outcome.wrong(f"job {job.id} never logged from both ranks")
                continue
            time.sleep(rng.uniform(0.0, 1.0))
            state = json.loads(Path(jobdir, "state.json").read_text())
            kill(int(state["pid"]), signal.SIGKILL)
            at = time.monotonic()
            outcome.faults += 1
            # Nobody looks (a closed notebook): the job's processes must stop by themselves.
            if wait_until(lambda d=jobdir: not processes_mentioning(d, skip_zombies=True) or None,
                          GUARD) is None:
                ran_on += 1
                outcome.wrong(f"job {job.id}: its processes ran on unwatched after the supervisor was "
                              f"killed: {processes_mentioning(jobdir, skip_zombies=True)}")
            unwatched_s = time.monotonic() - at
            fresh = LocalTier(profile, Registry(workdir / "registry.sqlite"), watcher_options=FAST)
            try:
                status = fresh.attach(job.id).status()
            finally:
                fresh.close()
            outcome.recover_s.append(unwatched_s)
            if status.state is not JobState.FAILED or "supervisor" not in (status.reason or ""):
                outcome.wrong(f"job {job.id} after its supervisor was killed: {status.state} "
                              f"({status.reason})")
            left = wait_until(lambda d=jobdir: not processes_mentioning(d, skip_zombies=True) or None,
                              GUARD) is None
            if left:
                outcome.wrong(f"job {job.id}: processes left after reattach: "
                              f"{processes_mentioning(jobdir, skip_zombies=True)}")
            for rank in (0, 1):
                seen = [int(m.group(1)) for m in map(NUMBER.search, job.logs(rank=rank).splitlines()) if m]
                result = check_sequence(seen, max(seen, default=-1) + 1)
                outcome.checked += len(seen)
                outcome.lost += result.lost
                outcome.duplicated += result.duplicated
                if result.out_of_order:
                    outcome.wrong(f"job {job.id} rank {rank}: lines out of order")
            if progress:
                progress(f"  supervisor kill {i + 1}/{kills}")
    finally:
        for rec in tier.registry.list(limit=100):
            tier.cancel(rec)
        tier.close()
    if notes is not None and ran_on:
        notes.append(f"local: after {ran_on} of {outcome.faults} supervisor kills the ranks ran on "
                     "unwatched")
    return outcome
