"""A one-shot ``status()`` (no watcher: a kernel reattached, ``%tiers status``) reads the rank
files before asking the scheduler, so a "pending" asked after a run's ranks started is a requeue
nobody watched; and it reads them again for a job the scheduler says ended, so a rank that recorded
its exit in between is in the final status. Scripted answers on a local tier, no cluster."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from jupyter_tiers.config.registry import JobRecord, Registry
from jupyter_tiers.core.model import JobState, RankPhase, RankState, SchedulerInfo
from jupyter_tiers.local.tier import LocalTier
from tests.helpers import isolate_tiers, local_profile

REC = JobRecord(profile="local", tier="local", job_id="7", name="j", jobdir="/jobs/7", world_size=2)


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_tiers(tmp_path, monkeypatch)  # the tiers here are made by hand, never through the api


class Scripted(LocalTier):
    """Answers each rank read from ``rank_reads`` in turn and the scheduler with ``state``."""

    def __init__(self, workdir: Path, state: JobState, rank_reads: list[dict[int, RankState]]) -> None:
        super().__init__(local_profile(workdir), Registry(workdir / "registry.sqlite"))
        self.state, self.rank_reads = state, rank_reads
        self.calls: list[str] = []
        self.registry.add(REC)

    def poll_ranks(self, records: Sequence[JobRecord]) -> dict[str, dict[int, RankState]]:
        self.calls.append("ranks " + ",".join(r.job_id for r in records))
        return {REC.job_id: self.rank_reads.pop(0)}

    def poll_scheduler(self, records: Sequence[JobRecord]) -> dict[str, SchedulerInfo]:
        self.calls.append("sched")
        return {REC.job_id: SchedulerInfo(job_id=REC.job_id, state=self.state)}


def _running(attempt: int = 0) -> dict[int, RankState]:
    return {i: RankState(rank=i, phase=RankPhase.RUNNING, node=f"n{i}", attempt=attempt) for i in range(2)}


def test_a_requeue_nobody_watched_reads_as_waiting_with_one_restart(tmp_path: Path) -> None:
    tier = Scripted(tmp_path, JobState.PENDING, [_running(), _running()])
    status = tier.status([REC])["7"]
    assert tier.calls == ["ranks 7", "sched"]  # no second read: the job did not end
    assert (status.state, status.restarts) == (JobState.PENDING, 1), status
    assert [(r.phase, r.attempt) for r in status.ranks] == [(RankPhase.WAITING, 1)] * 2
    assert tier.registry.get("local/7").restarts == 1
    # Asked again, the same answer is the same restart, not a second one.
    again = tier.status([tier.registry.get("local/7")])["7"]
    assert (again.state, again.restarts) == (JobState.PENDING, 1), again


def test_a_rank_exit_recorded_after_the_first_read_is_in_the_final_status(tmp_path: Path) -> None:
    failed = {0: RankState(rank=0, phase=RankPhase.FAILED, node="n0", exit_code=1, ended_at=5.0),
              1: RankState(rank=1, phase=RankPhase.STOPPED, node="n1", signal=15, ended_at=6.0)}
    tier = Scripted(tmp_path, JobState.FAILED, [_running(), failed])
    status = tier.status([REC])["7"]
    assert tier.calls == ["ranks 7", "sched", "ranks 7"]
    assert status.state is JobState.FAILED and status.restarts == 0
    first = status.first_failure
    assert first is not None and (first.rank, first.node) == (0, "n0")
