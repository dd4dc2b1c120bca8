"""The one watch protocol (jupyter_tiers/engine/subscription.py) on fakes: a Subscription keeps the
latest status and stops at close; wait_for waits on it (or on a handle) for a predicate, a later
delivery, the end or the close; Job.wait is written with it (a --checkpoint-to job waits for the
end, after its upload); the server's hub subscribes to jobs and services alike through their
handles and closes every subscription when the last listener leaves.

No timed assertions: a waiter on another thread is released by a delivery, an end or a close,
and joined with a generous guard."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers.config.registry import JobRecord, Registry
from jupyter_tiers.core.model import JobState, JobStatus, ServiceState, ServiceStatus
from jupyter_tiers.engine.handles import Job
from jupyter_tiers.engine.subscription import Subscription, wait_for
from jupyter_tiers.faces.server.hub import Hub

GUARD = 60.0
JOB = JobRecord(profile="hpc", tier="slurm", job_id="7", name="train", world_size=1, state="RUNNING")
SVC = JobRecord(profile="serving", tier="kubernetes", job_id="echo", name="echo", kind="service",
                state="DEPLOYING")


def job_status(state: JobState, **kw: Any) -> JobStatus:
    return JobStatus(job_id="7", state=state, **kw)


def svc_status(state: ServiceState, ready: int = 0) -> ServiceStatus:
    return ServiceStatus(name="echo", state=state, ready=ready, desired=1)


class Tracked(Subscription[Any]):
    """A backend's subscription that counts how often it was detached."""

    def __init__(self, record: JobRecord, on_status: Callable[[Any], None] | None = None) -> None:
        super().__init__(record, on_status)
        self.detached = 0

    def _detach(self) -> None:
        self.detached += 1


def waiting(sub: Subscription[Any], fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Run ``fn`` (a wait on ``sub``) on a thread. Whether it is already inside the wait or not
    when the test delivers, the wait checks the subscription's state under its lock, so the
    outcome is the same."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    return thread, out


def joined(thread: threading.Thread) -> None:
    thread.join(GUARD)
    assert not thread.is_alive(), "the waiter was not released"


# --- Subscription ------------------------------------------------------------------------------


def test_deliver_keeps_the_latest_and_calls_back_until_closed() -> None:
    seen: list[JobStatus] = []
    sub = Tracked(JOB, seen.append)
    assert sub.latest is None and sub.delivered == 0 and not sub.ended and not sub.closed
    sub.deliver(job_status(JobState.PENDING))
    sub.deliver(job_status(JobState.RUNNING))
    assert [s.state for s in seen] == [JobState.PENDING, JobState.RUNNING]
    assert sub.latest == job_status(JobState.RUNNING) and sub.delivered == 2
    sub.close()
    sub.close()  # idempotent: the backend forgets it once
    assert sub.closed and sub.detached == 1
    sub.deliver(job_status(JobState.COMPLETED))  # a delivery already on its way: dropped
    assert len(seen) == 2 and sub.latest == job_status(JobState.RUNNING) and sub.delivered == 2


def test_a_with_block_closes_and_end_sets_the_final_status_without_a_callback() -> None:
    seen: list[JobStatus] = []
    with Tracked(JOB, seen.append) as sub:
        sub.deliver(job_status(JobState.COMPLETED))
        sub.end(job_status(JobState.COMPLETED, checkpoint="s3://b/ckpt"))
        assert sub.ended and sub.latest is not None and sub.latest.checkpoint == "s3://b/ckpt"
        assert len(seen) == 1
    assert sub.closed and sub.detached == 1
    assert "closed" in repr(sub) and JOB.key in repr(sub)


def test_a_broken_callback_reaches_the_backend_but_the_status_is_kept() -> None:
    def boom(status: JobStatus) -> None:
        raise RuntimeError("listener bug")

    sub = Subscription(JOB, boom)
    with pytest.raises(RuntimeError):
        sub.deliver(job_status(JobState.RUNNING))  # each backend logs it and carries on
    assert sub.latest == job_status(JobState.RUNNING)


# --- wait_for -------------------------------------------------------------------------------------


def test_wait_for_returns_the_first_status_that_satisfies_the_predicate() -> None:
    sub: Subscription[JobStatus] = Subscription(JOB)
    sub.deliver(job_status(JobState.PENDING))
    thread, out = waiting(sub, lambda: wait_for(sub, lambda s: s.state.terminal, GUARD))
    sub.deliver(job_status(JobState.RUNNING))
    assert thread.is_alive()  # RUNNING does not satisfy it
    sub.deliver(job_status(JobState.FAILED, exit_code=1))
    joined(thread)
    assert out == [job_status(JobState.FAILED, exit_code=1)]


def test_wait_for_at_once_when_the_latest_already_satisfies_it() -> None:
    sub: Subscription[ServiceStatus] = Subscription(SVC)
    sub.deliver(svc_status(ServiceState.READY, 1))
    assert wait_for(sub, lambda s: s.state.settled, GUARD) == svc_status(ServiceState.READY, 1)


def test_wait_for_after_skips_statuses_already_seen() -> None:
    """``after``: only a delivery after the first ``after`` counts (wait_ready's confirmation)."""
    sub: Subscription[ServiceStatus] = Subscription(SVC)
    sub.deliver(svc_status(ServiceState.READY, 1))
    thread, out = waiting(sub, lambda: wait_for(sub, lambda s: s.state.settled, GUARD, after=1))
    assert thread.is_alive()
    sub.deliver(svc_status(ServiceState.READY, 1))
    joined(thread)
    assert out == [svc_status(ServiceState.READY, 1)] and sub.delivered == 2


@pytest.mark.parametrize("release", ["end", "close"])
def test_wait_for_returns_at_the_end_or_the_close(release: str) -> None:
    sub: Subscription[JobStatus] = Subscription(JOB)
    sub.deliver(job_status(JobState.COMPLETED))
    thread, out = waiting(sub, lambda: wait_for(sub, lambda s: False, GUARD))
    assert thread.is_alive()
    if release == "end":
        sub.end(job_status(JobState.COMPLETED, checkpoint="s3://b/c"))
        joined(thread)
        assert out == [job_status(JobState.COMPLETED, checkpoint="s3://b/c")]
    else:
        sub.close()
        joined(thread)
        assert out == [job_status(JobState.COMPLETED)]


def test_wait_for_times_out_with_what_came_last() -> None:
    sub: Subscription[JobStatus] = Subscription(JOB)
    assert wait_for(sub, lambda s: True, 0) is None
    sub.deliver(job_status(JobState.RUNNING))
    assert wait_for(sub, lambda s: s.state.terminal, 0) == job_status(JobState.RUNNING)


class FakeBatchTier:
    """A batch tier whose watch delivers a script of statuses on its own thread, then ends."""

    def __init__(self, script: list[JobStatus], final: JobStatus | None = None) -> None:
        self.script = script
        self.final = final
        self.subs: list[Tracked] = []
        self.reads = 0

    def watch(self, record: JobRecord, *, on_status: Any = None, on_lines: Any = None, on_end: Any = None,
              log_offset: int = 0, skip_partial: bool = False, metrics: Any = None) -> Tracked:
        sub = Tracked(record, on_status)
        self.subs.append(sub)

        def run() -> None:
            for status in self.script:
                sub.deliver(status)
            if self.final is not None:
                sub.end(self.final)

        threading.Thread(target=run, daemon=True).start()
        return sub

    def status(self, records: list[JobRecord]) -> dict[str, JobStatus]:
        self.reads += 1
        return {records[0].job_id: job_status(JobState.RUNNING, reason="read")}


def test_wait_for_a_handle_watches_it_for_the_wait_only() -> None:
    tier = FakeBatchTier([job_status(JobState.RUNNING), job_status(JobState.COMPLETED)])
    job = Job(tier, JOB)  # type: ignore[arg-type]  # a fake tier
    assert wait_for(job, lambda s: s.state.terminal, GUARD) == job_status(JobState.COMPLETED)
    assert len(tier.subs) == 1 and tier.subs[0].closed and tier.subs[0].detached == 1


class Stream:
    """Not a handle: anything with watch() (the Watchable protocol) can be waited on."""

    def __init__(self) -> None:
        self.subs: list[Tracked] = []

    def watch(self) -> Subscription[Any]:
        sub = Tracked(SVC)
        self.subs.append(sub)
        return sub


def test_wait_for_takes_anything_watchable() -> None:
    source = Stream()
    thread, out = waiting(Subscription(SVC), lambda: wait_for(source, lambda s: s.ready == 1, GUARD))
    sub = wait_for_sub(source)
    sub.deliver(svc_status(ServiceState.DEPLOYING))
    sub.deliver(svc_status(ServiceState.READY, ready=1))
    joined(thread)
    assert out == [svc_status(ServiceState.READY, ready=1)] and sub.closed and sub.detached == 1


def wait_for_sub(source: Stream) -> Tracked:
    deadline = time.monotonic() + GUARD
    while not source.subs:
        assert time.monotonic() < deadline, "wait_for never watched its source"
        time.sleep(0.01)
    return source.subs[0]


def test_job_wait_returns_the_terminal_status_and_closes_its_subscription() -> None:
    tier = FakeBatchTier([job_status(JobState.RUNNING), job_status(JobState.FAILED, exit_code=2)])
    assert Job(tier, JOB).wait(GUARD) == job_status(JobState.FAILED, exit_code=2)  # type: ignore[arg-type]
    assert tier.subs[0].closed and tier.reads == 0


def test_a_checkpoint_to_job_waits_for_the_end_after_its_upload() -> None:
    """COMPLETED comes before the checkpoint's upload; wait returns the end's status (its URI)."""
    uploading = job_status(JobState.COMPLETED, checkpoint="/ckpt (uploading to s3://b/c)")
    done = job_status(JobState.COMPLETED, checkpoint="s3://b/c")
    tier = FakeBatchTier([uploading, done], final=done)
    record = JobRecord(**{**JOB.__dict__, "spec": {"checkpoint_to": "store"}})
    assert Job(tier, record).wait(GUARD) == done  # type: ignore[arg-type]


def test_job_wait_times_out_to_a_fresh_read_when_nothing_came() -> None:
    tier = FakeBatchTier([])
    assert Job(tier, JOB).wait(0) == job_status(JobState.RUNNING, reason="read")  # type: ignore[arg-type]
    assert tier.reads == 1


# --- the hub: one mechanism for jobs and services ----------------------------------------------


class FakeHandle:
    def __init__(self, tier: FakeTier, record: JobRecord) -> None:
        self.tier = tier
        self.record = record

    def watch(self, on_status: Any = None) -> Tracked:
        sub = Tracked(self.record, on_status)
        self.tier.subs[self.record.key] = sub
        first = (job_status(JobState.RUNNING, nodelist="n1") if self.record.kind == "job"
                 else svc_status(ServiceState.READY, 1))
        sub.deliver(first)
        return sub


class FakeTier:
    """Any tier: the hub asks only for handles (no watcher, no kind-specific call)."""

    def __init__(self) -> None:
        self.subs: dict[str, Tracked] = {}

    def handle(self, record: JobRecord) -> FakeHandle:
        return FakeHandle(self, record)


def test_the_hub_subscribes_to_jobs_and_services_through_their_handles(tmp_path: Path) -> None:
    registry = Registry(tmp_path / "hub.sqlite")
    registry.add(JOB)
    registry.add(SVC)
    tier = FakeTier()
    hub = Hub(scan_interval=0.05, records=registry.list, connect=lambda profile, kind: tier)
    messages: list[dict[str, Any]] = []
    token, _ = hub.listen(messages.append)
    try:
        deadline = time.monotonic() + GUARD
        while hub.watched() != sorted([JOB.key, SVC.key]) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert hub.watched() == sorted([JOB.key, SVC.key])
        assert hub.cached_status(JOB.key) == job_status(JobState.RUNNING, nodelist="n1")
        assert hub.cached_status(SVC.key) == svc_status(ServiceState.READY, 1)
        states = {i["key"]: i["state"] for i in hub.items()[0]}
        assert states == {JOB.key: "RUNNING", SVC.key: "READY"}
    finally:
        hub.unlisten(token)
    deadline = time.monotonic() + GUARD
    while hub.watched() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert hub.watched() == []
    assert all(sub.closed and sub.detached == 1 for sub in tier.subs.values()) and len(tier.subs) == 2
    hub.stop()
