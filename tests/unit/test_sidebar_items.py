"""Issue 29 §10: what a sidebar row says of a job that ended badly (its failure reason) and of a
deleted service ("deleted", not "no Deployment found")."""

from __future__ import annotations

from jupyter_tiers.app.actions import item_from
from jupyter_tiers.batch.status import failure_reason
from jupyter_tiers.core.model import JobState, JobStatus, RankPhase, RankState, WorkKind
from jupyter_tiers.core.record import JobRecord
from jupyter_tiers.k8s.parse import service_status


def _rec(kind: WorkKind = WorkKind.JOB, state: str = "RUNNING") -> JobRecord:
    return JobRecord(profile="box", tier="slurm", job_id="41", name="ft", state=state, kind=kind,
                     submitted_at=1000.0, updated_at=1000.0, world_size=4)


def _failed(**kw: object) -> JobStatus:
    base = dict(job_id="41", state=JobState.FAILED, elapsed_s=75, exit_code=1, world_size=4)
    base.update(kw)
    return JobStatus(**base)  # type: ignore[arg-type]


def test_a_failed_job_row_names_the_first_failing_rank_and_its_elapsed_time() -> None:
    ranks = (RankState(0, RankPhase.STOPPED, node="c1", signal=15, ended_at=12.0),
             RankState(3, RankPhase.FAILED, node="c2", exit_code=1, ended_at=10.0))
    item = item_from(_rec(), _failed(ranks=ranks), now=2000.0)
    assert item.state == "FAILED" and item.terminal
    assert item.reason == "first failure: rank 3 (c2) exit 1"
    assert item.elapsed_s == 75


def test_failure_reasons() -> None:
    assert failure_reason(_failed()) == "exit 1 before any rank ran"
    assert failure_reason(_failed(state=JobState.TIMEOUT, exit_code=0, reason="TimeLimit")) == "TimeLimit"
    assert failure_reason(_failed(state=JobState.CANCELLED, exit_code=0, reason="None")) == ""
    assert failure_reason(_failed(state=JobState.COMPLETED, exit_code=0, reason="x")) == ""
    assert failure_reason(_failed(state=JobState.RUNNING, reason="x")) == ""
    ran = (RankState(0, RankPhase.EXITED, exit_code=0),)
    assert failure_reason(_failed(exit_code=2, ranks=ran)) == "exit 2"


def test_a_completed_or_running_job_row_has_no_failure_reason() -> None:
    done = item_from(_rec(), _failed(state=JobState.COMPLETED, exit_code=0), now=2000.0)
    assert done.reason == "" and done.elapsed_s == 75
    running = item_from(_rec(), JobStatus("41", JobState.RUNNING, elapsed_s=5, world_size=4), now=2000.0)
    assert running.reason == "" and running.elapsed_s == 5


def test_a_deleted_service_reads_deleted() -> None:
    status = service_status("llama", None, [], [], now=1000.0)
    assert status.reason == "deleted"
    item = item_from(_rec(WorkKind.SERVICE, "READY"), status, now=1000.0)
    assert item.state == "DELETED" and item.reason == "deleted"
    assert "no Deployment" not in item.summary
