"""The watcher's schedule and retries, on a fake tier and a fake clock (no cluster, no sleeping):
scheduler back-off in steady state and after news, back-off while the controller or the
connection is down and recovery when it answers, rank-poll failures, the end of a job, and a log
follower that reconnects at the exact byte after dropped streams."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from jupyter_tiers.batch.logs import LogDecoder
from jupyter_tiers.batch.status import ended_entry
from jupyter_tiers.config.registry import JobRecord
from jupyter_tiers.core.errors import ControllerUnreachable, TiersError
from jupyter_tiers.core.model import JobState, JobStatus, RankPhase, RankState, SchedulerInfo
from jupyter_tiers.engine import watch as watch_mod
from jupyter_tiers.engine.rank_metrics import RankMetrics
from jupyter_tiers.engine.watch import JobSubscription, LogFollower, Watcher, _Watched

REC = JobRecord(profile="fake", tier="fake", job_id="7", name="j", jobdir="/jobs/7", world_size=2)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


class FakeTier:
    """Answers from scripted lists; an Exception in a script is raised instead of answered."""

    name = "fake"

    def __init__(self) -> None:
        self.sched: list[Any] = []
        self.ranks: list[Any] = []
        self.state = JobState.RUNNING
        self.updates: list[dict[str, Any]] = []
        self.ended: list[JobStatus] = []  # the statuses given to record_end
        self.registry = SimpleNamespace(update=lambda key, **kw: self.updates.append(kw),
                                        record_end=lambda rec, st: self.ended.append(st))
        self.notes: dict[str, str] = {}  # what rank_notes answers (a full disk)

    def poll_scheduler(self, records: list[JobRecord]) -> dict[str, SchedulerInfo]:
        answer = self.sched.pop(0) if self.sched else None
        if isinstance(answer, Exception):
            raise answer
        return {REC.job_id: SchedulerInfo(job_id=REC.job_id, state=answer or self.state)}

    def rank_notes(self) -> dict[str, str]:
        return dict(self.notes)

    def poll_ranks(self, records: list[JobRecord]) -> dict[str, dict[int, RankState]]:
        answer = self.ranks.pop(0) if self.ranks else None
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, dict):  # the ranks themselves
            return {REC.job_id: answer}
        phase = answer or RankPhase.RUNNING
        return {REC.job_id: {i: RankState(rank=i, phase=phase) for i in range(2)}}


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    # Only watch.py's view of time: other threads keep the real clock.
    monkeypatch.setattr(watch_mod, "time", SimpleNamespace(monotonic=c.monotonic))
    return c


def _watcher(tier: FakeTier, statuses: list[JobStatus], **kw: Any) -> Watcher:
    kw.setdefault("jitter", 0.0)  # exact gaps; test_reconnects_jitter_within_bounds has jitter
    w = Watcher(tier, status_interval=15.0, rank_interval=1.0, first_poll=0.5, max_backoff=30.0, **kw)
    sub = JobSubscription(REC, on_status=statuses.append)
    w._jobs[REC.key] = _Watched(REC, subs=[sub])  # as watch() does, without starting the thread
    return w


def _scheduler_gaps(w: Watcher, clock: Clock, n: int) -> list[float]:
    """Run cycles at each scheduler due time; the gaps between scheduler queries."""
    gaps = []
    for _ in range(n):
        clock.now = max(clock.now, w._next_sched)
        before = clock.now
        w._cycle()
        gaps.append(round(w._next_sched - before, 3))
    return gaps


def test_steady_state_backs_off_to_the_status_interval(clock: Clock) -> None:
    tier, statuses = FakeTier(), []
    w = _watcher(tier, statuses)
    assert _scheduler_gaps(w, clock, 8) == [0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 15.0, 15.0]
    assert w.scheduler_queries == 8
    assert statuses[-1].state is JobState.RUNNING and statuses[-1].controller_reachable


def test_a_newly_watched_job_gets_no_status_before_a_query_answers(clock: Clock) -> None:
    # A cycle in which neither the scheduler nor the rank files were due must not deliver a
    # made-up PENDING: a wait that timed out would return it although the job runs (the
    # on-cluster contract run, CI of stop 24).
    tier, statuses = FakeTier(), []
    w = _watcher(tier, statuses)
    w._next_sched = w._next_ranks = clock.now + 0.5
    w._cycle()
    assert statuses == [] and w.scheduler_queries == 0 and w.rank_queries == 0
    clock.now += 0.5
    w._cycle()
    assert [s.state for s in statuses] == [JobState.RUNNING]


def test_a_job_requeued_before_it_was_watched_shows_pending_with_its_restart(clock: Clock) -> None:
    # A notebook reopened while its job waits after a preemption: the old run's rank files say
    # running. The watcher reads them before asking the scheduler, so the scheduler's "pending"
    # is news of a requeue, not a query older than the rank files.
    tier, statuses = FakeTier(), []
    calls: list[str] = []
    poll_ranks, poll_scheduler = tier.poll_ranks, tier.poll_scheduler
    tier.poll_ranks = lambda records: (calls.append("ranks"), poll_ranks(records))[1]  # type: ignore[method-assign]
    tier.poll_scheduler = lambda records: (calls.append("sched"), poll_scheduler(records))[1]  # type: ignore[method-assign]
    tier.state = JobState.PENDING
    w = _watcher(tier, statuses)
    w._cycle()
    assert calls == ["ranks", "sched"]
    assert (statuses[-1].state, statuses[-1].restarts) == (JobState.PENDING, 1), statuses[-1]
    assert {r.phase for r in statuses[-1].ranks} == {RankPhase.WAITING}
    assert tier.updates[-1]["restarts"] == 1  # recorded: a kernel restarted now knows it too
    clock.now = max(w._next_ranks, w._next_sched)  # asked again: still one restart, still waiting
    w._cycle()
    assert calls[-2:] == ["ranks", "sched"]
    shown = w._jobs[REC.key].status
    assert shown is not None and (shown.state, shown.restarts) == (JobState.PENDING, 1), shown


def test_a_rank_that_records_its_exit_after_the_first_read_is_in_the_final_status(clock: Clock) -> None:
    # The rank files are read before the scheduler is asked. Rank 0 fails after that read and the
    # scheduler then says FAILED: the final status (its watch ends there) must name rank 0, so
    # the rank files of an ended job are read once more.
    tier, statuses = FakeTier(), []
    failed = {0: RankState(rank=0, phase=RankPhase.FAILED, node="n1", exit_code=1, ended_at=5.0),
              1: RankState(rank=1, phase=RankPhase.STOPPED, node="n2", signal=15, ended_at=6.0)}
    tier.ranks = [RankPhase.RUNNING, failed]
    tier.sched = [JobState.FAILED]
    w = _watcher(tier, statuses)
    w._cycle()
    assert tier.ranks == [] and w.rank_queries == 2  # read again, because the job ended
    final = statuses[-1]
    assert final.state is JobState.FAILED
    first = final.first_failure
    assert first is not None and (first.rank, first.node) == (0, "n1")
    assert tier.ended[-1].first_failure == final.first_failure  # what the registry keeps
    # If that second read fails, the end waits for the next cycle's: no end without it.
    tier3, statuses3 = FakeTier(), []
    tier3.ranks = [RankPhase.RUNNING, TiersError("connection dropped"), RankPhase.RUNNING, failed]
    tier3.state = JobState.FAILED
    w3 = _watcher(tier3, statuses3)
    w3._cycle()
    assert statuses3 and not statuses3[-1].state.terminal, statuses3
    clock.now = max(w3._next_ranks, w3._next_sched)
    w3._cycle()
    first3 = statuses3[-1].first_failure
    assert statuses3[-1].state is JobState.FAILED and first3 is not None and first3.rank == 0
    # A job that goes on is not read twice.
    tier2, statuses2 = FakeTier(), []
    w2 = _watcher(tier2, statuses2)
    w2._cycle()
    assert w2.rank_queries == 1 and statuses2[-1].state is JobState.RUNNING


def test_news_and_kick_bring_the_next_query_forward(clock: Clock) -> None:
    tier, statuses = FakeTier(), []
    w = _watcher(tier, statuses)
    _scheduler_gaps(w, clock, 8)
    tier.state = JobState.SUSPENDED  # a state change is news
    assert _scheduler_gaps(w, clock, 3) == [0.5, 1.0, 2.0]
    _scheduler_gaps(w, clock, 6)
    w.kick()  # after a submit or a cancel
    assert w._next_sched == clock.now + 0.5
    assert _scheduler_gaps(w, clock, 2) == [0.5, 1.0]


def test_unreachable_controller_backs_off_then_recovers(clock: Clock) -> None:
    tier, statuses = FakeTier(), []
    w = _watcher(tier, statuses)
    _scheduler_gaps(w, clock, 3)
    tier.sched = [ControllerUnreachable("slurmctld down")] * 7
    assert _scheduler_gaps(w, clock, 7) == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    down = statuses[-1]
    assert not down.controller_reachable
    assert down.message == "controller unreachable: slurmctld down — reconnecting (attempt 7, next in 30 s)"
    assert down.state is JobState.RUNNING  # the last known state is kept, not invented
    # The scheduler answers again: fast polling resumes and the banner goes away.
    gaps = _scheduler_gaps(w, clock, 2)
    assert gaps[0] <= 15.0 and w._fail_delay == 0.0
    assert statuses[-1].controller_reachable and not statuses[-1].message


@pytest.mark.parametrize(
    ("error", "words"),
    [(TiersError("connection lost"),
      "cannot reach the cluster: connection lost — reconnecting (attempt 2, next in 4 s)"),
     (RuntimeError("bug"),
      "status query failed: RuntimeError('bug') — reconnecting (attempt 2, next in 4 s)")],
)
def test_other_scheduler_failures_back_off_the_same_way(clock: Clock, error: Exception, words: str) -> None:
    tier, statuses = FakeTier(), []
    w = _watcher(tier, statuses)
    tier.sched = [error, error]
    assert _scheduler_gaps(w, clock, 2) == [2.0, 4.0]
    assert statuses[-1].message == words and not statuses[-1].controller_reachable


def test_reconnects_jitter_within_bounds(clock: Clock) -> None:
    tier, statuses = FakeTier(), []
    w = _watcher(tier, statuses, jitter=0.2)
    w._rng.seed(7)
    tier.sched = [ControllerUnreachable("down")] * 12
    gaps = _scheduler_gaps(w, clock, 12)
    plain = [2.0, 4.0, 8.0, 16.0] + [30.0] * 8
    assert all(0.8 * p <= g <= p for g, p in zip(gaps, plain, strict=True)), gaps
    assert len(set(gaps[4:])) > 1  # the capped waits are not all the same: no lockstep
    assert statuses[-1].message.endswith(f"reconnecting (attempt 12, next in {round(gaps[-1])} s)")


def test_a_state_too_old_is_shown_unknown_and_not_recorded(clock: Clock) -> None:
    tier, statuses = FakeTier(), []
    w = _watcher(tier, statuses, stale_after_s=300.0)
    _scheduler_gaps(w, clock, 3)
    assert statuses[-1].state is JobState.RUNNING
    recorded = len(tier.updates)
    tier.sched = [ControllerUnreachable("down")] * 20
    _scheduler_gaps(w, clock, 9)  # 2+4+8+16+30*5 = 180 s: still the last seen state
    assert statuses[-1].state is JobState.RUNNING and not statuses[-1].controller_reachable
    _scheduler_gaps(w, clock, 6)  # 2+4+8+16+30*10 = 330 s after the last answer (at 5 min 2 s)
    shown = statuses[-1]
    assert shown.state is JobState.UNKNOWN
    assert shown.reason is not None and shown.reason.startswith("last seen RUNNING 5 min ago (at ")
    assert "reconnecting (attempt 15, next in 30 s)" in (shown.message or "")
    assert len(tier.updates) == recorded  # the registry keeps RUNNING, as last seen
    tier.sched = []
    _scheduler_gaps(w, clock, 1)  # it answers again: RUNNING, no banner
    assert statuses[-1].state is JobState.RUNNING and statuses[-1].controller_reachable
    assert not statuses[-1].reason and len(tier.updates) == recorded


def test_stale_after_comes_from_the_profile() -> None:
    tier = FakeTier()
    tier.profile = SimpleNamespace(settings={"stale_after": 60})  # type: ignore[attr-defined]
    assert Watcher(tier).stale_after == 60.0
    assert Watcher(FakeTier()).stale_after == 300.0


def test_rank_poll_failure_is_reported_and_retried_each_rank_interval(clock: Clock) -> None:
    tier, statuses = FakeTier(), []
    w = _watcher(tier, statuses)
    w._cycle()
    tier.ranks = [TiersError("ls: timed out")]
    clock.now = w._next_ranks
    w._cycle()
    assert statuses[-1].message == "cannot read rank state, retrying: ls: timed out"
    assert statuses[-1].controller_reachable  # the scheduler is fine
    assert w._next_ranks == clock.now + 1.0
    clock.now = w._next_ranks
    w._cycle()
    assert not statuses[-1].message


def test_the_watcher_notes_when_the_scheduler_last_answered(clock: Clock) -> None:
    tier, statuses = FakeTier(), []
    w = _watcher(tier, statuses)
    assert w.answered_at is None
    w._cycle()
    first = w.answered_at
    assert first is not None
    tier.sched = [ControllerUnreachable("down")]
    clock.now = w._next_sched
    w._cycle()
    assert w.answered_at == first  # a failed query is no answer


def test_a_full_disk_seen_by_the_rank_poll_is_shown_until_it_is_gone(clock: Clock) -> None:
    """Issue 18 §6: the job directory's disk full on the cluster side was a silent RUNNING."""
    tier, statuses = FakeTier(), []
    w = _watcher(tier, statuses)
    tier.notes = {REC.job_id: "the cluster's disk holding /jobs/7 is full (0 KiB free): ..."}
    w._cycle()
    assert statuses[-1].message == tier.notes[REC.job_id]
    assert statuses[-1].state is JobState.RUNNING and statuses[-1].controller_reachable
    tier.notes = {}
    clock.now = w._next_ranks
    w._cycle()
    assert not statuses[-1].message


def test_ranks_ending_ask_the_scheduler_soon(clock: Clock) -> None:
    tier, statuses = FakeTier(), []
    w = _watcher(tier, statuses)
    _scheduler_gaps(w, clock, 8)  # steady: next query 15 s away
    tier.ranks = [RankPhase.EXITED]
    clock.now = w._next_ranks
    w._cycle()
    assert w._next_sched - clock.now == 0.5  # was 15 s away: the fast back-off starts again
    assert _scheduler_gaps(w, clock, 3) == [0.5, 1.0, 2.0]  # and still backs off


def test_a_terminal_state_ends_the_subscription_and_is_recorded(clock: Clock) -> None:
    tier, statuses = FakeTier(), []
    w = _watcher(tier, statuses)
    ended = threading.Event()
    w._jobs[REC.key].subs[0].on_end = lambda status: ended.set()
    w._cycle()
    tier.sched = [JobState.COMPLETED]
    tier.ranks = [RankPhase.EXITED]
    clock.now = w._next_sched
    w._cycle()
    assert ended.wait(30)
    assert statuses[-1].state is JobState.COMPLETED
    assert [u["state"] for u in tier.updates] == ["RUNNING", "COMPLETED"]
    ends = [e for e in map(ended_entry, tier.ended) if e is not None]  # what Registry.record_end keeps
    assert ends == [{"reason": "", "elapsed_s": None, "failure": None}]  # recorded once, at the end
    assert w._active() == []  # nothing left to poll
    assert w._cycle() == 5.0


class FlakyLogTier:
    """open_log: fails, then streams the log in pieces cut mid-line and drops, then hangs until
    closed; read_log: the rest of the file (the follower's final drain)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.opened_at: list[int] = []
        self.plan = ["fail", "drop", "fail", "drop", "hang"]

    def log_decoder(self, offset: int, *, skip_partial: bool = False) -> LogDecoder:
        return LogDecoder(offset, skip_partial=skip_partial)

    def open_log(self, record: JobRecord, offset: int) -> Any:
        self.opened_at.append(offset)
        what = self.plan.pop(0) if self.plan else "hang"
        if what == "fail":
            raise TiersError("connection refused")
        return _Stream(self.data[offset:offset + 23] if what == "drop" else b"", hang=what == "hang")

    def read_log(self, record: JobRecord, offset: int = 0) -> bytes:
        return self.data[offset:]


class _Stream:
    def __init__(self, data: bytes, hang: bool) -> None:
        self.data, self.hang, self.closed = data, hang, threading.Event()

    def __iter__(self) -> Iterator[bytes]:
        for i in range(0, len(self.data), 5):
            yield self.data[i:i + 5]
        if self.hang:
            self.closed.wait(60)
        else:
            raise TiersError("connection lost while following")

    def close(self) -> None:
        self.closed.set()


def test_log_follower_reconnects_at_the_exact_byte_and_loses_nothing() -> None:
    data = b"".join(f"{i % 2}: line {i}\n".encode() for i in range(20))
    tier = FlakyLogTier(data)
    got: list[str] = []
    follower = LogFollower(tier, REC, 0, lambda lines: got.extend(ln.text for ln in lines),  # type: ignore[arg-type]
                           max_backoff=0.5)
    follower.start()
    while len(tier.opened_at) < 5:  # a bound, not a timing: the plan has five opens
        threading.Event().wait(0.05)
    follower.finish(timeout=60)
    assert got == [f"line {i}" for i in range(20)]
    assert follower.offset == len(data)
    assert follower.reconnects >= 4
    # Every reopen starts where the bytes received so far end (mid-line included).
    assert tier.opened_at[:5] == [0, 0, 23, 23, 46]


def test_log_follower_feeds_its_metrics_every_line_before_the_listener_gets_a_batch() -> None:
    """Issue 27: a followed log's metric points are parsed once, by its follower. Each batch is in
    ``metrics`` before the listener sees it (a view reads, never parses), across reconnects, and
    what the throttle kept is parsed at the log's end."""
    data = b"".join(f"{i % 2}: step {i} loss={1.0 / (i + 1):.4f}\n".encode() for i in range(20))
    tier = FlakyLogTier(data)
    metrics = RankMetrics(max_points=200, parse_every=3600.0)  # one full parse; the rest kept
    delivered: list[int] = []  # rank 0's lines the listener has been given
    read: list[int] = []  # rank 0's lines in ``metrics`` (parsed or kept) when it was given them

    def on_lines(lines: Any) -> None:
        delivered.append((delivered[-1] if delivered else 0) + sum(ln.rank == 0 for ln in lines))
        tracker = metrics.summary
        read.append(len(tracker.to_lists().get("loss", ())) + len(tracker._deferred))

    follower = LogFollower(tier, REC, 0, on_lines, max_backoff=0.5, metrics=metrics)  # type: ignore[arg-type]
    follower.start()
    while len(tier.opened_at) < 5:  # a bound, not a timing: the plan has five opens
        threading.Event().wait(0.05)
    follower.finish(timeout=60)
    assert len(delivered) >= 3 and read == delivered
    # The end parsed what the throttle kept: rank 0's last point is the log's last rank-0 line.
    assert metrics.summary.main() == ("loss", float(f"{1.0 / 19:.4f}"))
    assert [x for x, _ in metrics.summary.to_lists()["loss"]] == list(range(0, 20, 2))
