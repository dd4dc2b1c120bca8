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


def test_a_job_that_ended_keeps_its_reason_and_run_time_in_its_record(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The list reads an ended job from its record alone (no cluster is asked about it again):
    the watcher records ``ended`` in its detail before its final state."""
    from jupyter_tiers.batch.status import ended_of
    from jupyter_tiers.config.registry import Registry
    from jupyter_tiers.core.detail import entries, with_entries

    ranks = (RankState(1, RankPhase.FAILED, node="c2", exit_code=3, ended_at=1.0),)
    final = _failed(ranks=ranks)
    registry = Registry(tmp_path / "jobs.db")
    rec = _rec()
    registry.add(rec)
    registry.set_entries(rec.key, upload=None, checkpoint_dir="/ckpt")
    registry.record_end(registry.get(rec.key), final)  # what the watcher and status() write
    registry.update(rec.key, state="FAILED")
    stored = registry.get(rec.key)
    assert entries(stored.detail)["checkpoint_dir"] == "/ckpt"  # another owner's entry kept
    item = item_from(stored, None, now=5000.0)
    assert item.state == "FAILED" and item.reason == "first failure: rank 1 (c2) exit 3"
    assert item.elapsed_s == 75 and item.reason in item.summary
    # A running job's record says nothing of an end; a damaged entry reads as nothing.
    assert item_from(_rec(), None, now=5000.0).reason == ""
    for bad in ({"ended": "x"}, {"ended": {"reason": 3, "elapsed_s": -1}}, {"ended": {"elapsed_s": True}}):
        assert ended_of(bad) == ("", None)
    broken = JobRecord(**{**rec.__dict__, "state": "FAILED", "detail": with_entries(None, ended=[1])})
    assert item_from(broken, None, now=5000.0).reason == ""
