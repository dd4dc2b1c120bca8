"""The service layer's pure item building: every contract field, from a registry record alone or
with a live status."""

from __future__ import annotations

from jupyter_tiers.app import actions
from jupyter_tiers.batch.status import summary_line
from jupyter_tiers.config.registry import JobRecord
from jupyter_tiers.core.model import (
    CanaryStatus,
    JobState,
    JobStatus,
    RankPhase,
    RankState,
    ServiceState,
    ServiceStatus,
)

NOW = 1_800_000_000.0
CONTRACT = {"key", "id", "kind", "name", "profile", "tier", "state", "terminal", "size", "where",
            "reason", "started", "elapsed_s", "summary"}


def job(state: str = "RUNNING", **fields: object) -> JobRecord:
    return JobRecord(profile="hpc", tier="slurm", job_id="41", name="ft", world_size=4,
                     spec={"nodes": 2}, state=state, submitted_at=NOW - 100, **fields)  # type: ignore[arg-type]


def svc(state: str = "READY", detail: str | None = "2/2") -> JobRecord:
    return JobRecord(profile="serving", tier="kubernetes", job_id="web", name="web", kind="service",
                     state=state, detail=detail, submitted_at=NOW - 100)


def test_a_job_from_its_record_alone() -> None:
    item = actions.item_from(job(nodelist="node[1-2]"), now=NOW).to_json()
    assert set(item) >= CONTRACT
    assert item["key"] == "hpc/41" and item["kind"] == "job" and item["state"] == "RUNNING"
    assert item["size"] == "4 ranks on 2 nodes" and item["where"] == "node[1-2]"
    assert item["terminal"] is False and item["started"] is None and item["elapsed_s"] is None
    assert item["summary"] == "job 41 RUNNING on node[1-2]"
    assert item["submitted"] == "2027-01-15T07:58:20+00:00"  # NOW - 100 s, UTC
    one = actions.item_from(JobRecord(profile="p", tier="local", job_id="1", name="n", world_size=1,
                                      spec={"nodes": 1}), now=NOW)
    assert one.size == "1 rank on 1 node"
    assert actions.item_from(job("BOGUS"), now=NOW).state == "UNKNOWN"


def test_a_pending_then_running_then_failed_job() -> None:
    pending = JobStatus("41", JobState.PENDING, reason="Resources", start_time="2027-01-15T09:00:00",
                        world_size=4)
    item = actions.item_from(job("PENDING"), pending, NOW)
    assert (item.reason, item.started, item.summary) == ("Resources", None, "job 41 PENDING (Resources)")
    running = JobStatus("41", JobState.RUNNING, reason="None", nodelist="node[3-4]",
                        start_time="2027-01-15T07:59:00", elapsed_s=61, world_size=4)
    item = actions.item_from(job(), running, NOW)
    assert (item.reason, item.where, item.elapsed_s) == ("", "node[3-4]", 61)
    assert item.started == "2027-01-15T07:59:00"
    # Issue 41 §8: when elapsed_s was true, so a row re-sent later keeps ticking from there.
    assert item.elapsed_at == NOW and actions.item_from(job("PENDING"), pending, NOW).elapsed_at is None
    ranks = (RankState(0, RankPhase.FAILED, node="node3", exit_code=7, ended_at=5.0),
             RankState(1, RankPhase.STOPPED, node="node3", signal=15))
    failed = JobStatus("41", JobState.FAILED, nodelist="node3", elapsed_s=70, ranks=ranks, world_size=2)
    item = actions.item_from(job("FAILED"), failed, NOW)
    assert item.terminal is True and item.summary == summary_line(failed)
    assert "first failure: rank 0 (node3) exit 7" in item.summary


def test_a_service_from_its_record_and_from_a_status() -> None:
    item = actions.item_from(svc(detail="1/2"), now=NOW).to_json()
    assert set(item) >= CONTRACT
    assert (item["kind"], item["state"], item["size"]) == ("service", "READY", "1/2 ready")
    assert item["terminal"] is False
    assert actions.item_from(svc("DELETED"), now=NOW).terminal is True
    status = ServiceStatus("web", ServiceState.READY, desired=2, updated=2, ready=2, available=2,
                           endpoint="http://web.team.svc:8000", created_at=NOW - 30, revision="3")
    item = actions.item_from(svc(), status, NOW).to_json()
    assert item["size"] == "2/2 ready" and item["where"] == "http://web.team.svc:8000"
    assert item["elapsed_s"] == 30 and item["started"] == "2027-01-15T07:59:30+00:00"
    assert item["elapsed_at"] == NOW
    assert item["reason"] == "" and item["summary"].startswith("service web READY 2/2")
    failing = ServiceStatus("web", ServiceState.FAILED, desired=2,
                            reason="pod web-x CrashLoopBackOff (exit 1)")
    item = actions.item_from(svc("FAILED"), failing, NOW).to_json()
    assert item["reason"] == "pod web-x CrashLoopBackOff (exit 1)" and item["where"] == ""


def test_a_service_with_a_canary_offers_its_share_and_counts() -> None:
    record = JobRecord(profile="serving", tier="kubernetes", job_id="web", name="web", kind="service",
                       state="READY", detail="9/9 + canary 1/1", submitted_at=NOW - 100,
                       spec={"live_canary": {"percent": 10, "replicas": 1, "total": 10}})
    item = actions.item_from(record, now=NOW).to_json()
    assert item["canary"] == 10 and item["size"] == "9/9 ready + canary 1/1"
    status = ServiceStatus("web", ServiceState.READY, desired=9, ready=9, available=9,
                           canary=CanaryStatus(percent=10, desired=1, ready=0, state=ServiceState.DEPLOYING))
    item = actions.item_from(record, status, NOW).to_json()
    assert item["canary"] == 10 and item["size"] == "9/9 ready + canary 0/1"
    assert "; canary 10 %: DEPLOYING 0/1" in item["summary"]
    assert actions.item_from(svc(), now=NOW).canary is None


def test_what_is_active() -> None:
    assert actions.is_active(job("PENDING")) and actions.is_active(job("RUNNING"))
    assert not actions.is_active(job("COMPLETED")) and not actions.is_active(job("CANCELLED by 0"))
    assert actions.is_active(svc("FAILED")) and not actions.is_active(svc("DELETED"))


def test_a_jobs_checkpoint_upload_rides_in_its_item_for_the_sidebar() -> None:
    from jupyter_tiers.data.handoff import encode_detail, with_upload

    detail = with_upload(encode_detail("/c", "/c/ckpt"), {"state": "uploading", "uri": "s3://b/k",
                                                          "sent": 1_215_000_000, "total": 2_700_000_000})
    item = actions.item_from(job("COMPLETED", detail=detail), now=NOW).to_json()
    assert item["upload"] == {"state": "uploading", "uri": "s3://b/k", "sent": 1_215_000_000,
                              "total": 2_700_000_000}
    assert actions.item_from(job("COMPLETED", detail=encode_detail("/c", "/c/ckpt")), now=NOW).upload is None
    # Only known keys of the right types: the registry's detail may hold anything.
    odd = with_upload(None, {"state": "failed", "error": "a\nb", "sent": True, "total": -1, "x": 1})
    assert actions.item_from(job("COMPLETED", detail=odd), now=NOW).upload == {"state": "failed",
                                                                               "error": "a b"}
    unknown = with_upload(None, {"state": "odd"})
    assert actions.item_from(job("COMPLETED", detail=unknown), now=NOW).upload is None
    # An array's row carries none (its tasks' uploads are in its summary).
    array = job("COMPLETED", detail=detail)
    array = JobRecord(**{**array.__dict__, "spec": {"nodes": 1, "array": "0-3"}})
    assert actions.item_from(array, now=NOW).upload is None
