"""merge_status (scheduler view + rank files) and the one-line summary printed when a job ends."""

from __future__ import annotations

from jupyter_tiers.batch.status import describe_rank, merge_status, summary_line
from jupyter_tiers.core.model import JobState, JobStatus, RankPhase, RankState, SchedulerInfo


def _running(rank: int, node: str = "node1", at: float = 100.0) -> RankState:
    return RankState(rank=rank, phase=RankPhase.RUNNING, node=node, started_at=at)


def _failed(rank: int, code: int, ended: float, node: str = "node1") -> RankState:
    return RankState(
        rank=rank, phase=RankPhase.FAILED, node=node, exit_code=code, started_at=100.0, ended_at=ended
    )


def _exited(rank: int, ended: float = 200.0, node: str = "node1") -> RankState:
    return RankState(
        rank=rank, phase=RankPhase.EXITED, node=node, exit_code=0, started_at=100.0, ended_at=ended
    )


# --- merge_status -----------------------------------------------------------------------------


def test_no_information_yet_is_pending_with_waiting_ranks() -> None:
    st = merge_status("1", None, None, world_size=3)
    assert st.state is JobState.PENDING
    assert st.world_size == 3
    assert [(r.rank, r.phase) for r in st.ranks] == [(i, RankPhase.WAITING) for i in range(3)]


def test_pending_becomes_running_from_rank_files() -> None:
    sched = SchedulerInfo(job_id="5", state=JobState.PENDING, reason="Resources",
                          start_time="2024-05-01T12:00:00")
    st = merge_status("5", sched, {1: _running(1)}, world_size=2)
    assert st.state is JobState.RUNNING
    assert st.reason is None
    assert st.ranks[0].phase is RankPhase.WAITING
    assert st.ranks[1].phase is RankPhase.RUNNING


def test_pending_stays_pending_while_all_ranks_wait() -> None:
    sched = SchedulerInfo(job_id="5", state=JobState.PENDING, reason="Priority")
    st = merge_status("5", sched, {}, world_size=2)
    assert st.state is JobState.PENDING
    assert st.reason == "Priority"


def test_unknown_becomes_running_but_configuring_is_kept() -> None:
    ranks = {0: _running(0)}
    unknown = merge_status("6", SchedulerInfo(job_id="6", state=JobState.UNKNOWN), ranks, 1)
    assert unknown.state is JobState.RUNNING
    conf = merge_status("6", SchedulerInfo(job_id="6", state=JobState.CONFIGURING), ranks, 1)
    assert conf.state is JobState.CONFIGURING


def test_terminal_job_turns_running_ranks_into_stopped() -> None:
    sched = SchedulerInfo(job_id="7", state=JobState.CANCELLED, elapsed_s=30)
    ranks = {0: _exited(0), 1: _running(1), 2: _failed(2, 3, 150.0)}
    st = merge_status("7", sched, ranks, world_size=4)
    phases = [r.phase for r in st.ranks]
    assert phases == [RankPhase.EXITED, RankPhase.STOPPED, RankPhase.FAILED, RankPhase.WAITING]
    # the stopped rank keeps what was known about it
    assert st.ranks[1].node == "node1" and st.ranks[1].started_at == 100.0
    assert st.count(RankPhase.STOPPED) == 1


def test_running_job_keeps_running_ranks() -> None:
    sched = SchedulerInfo(job_id="8", state=JobState.RUNNING)
    st = merge_status("8", sched, {0: _running(0)}, world_size=1)
    assert st.ranks[0].phase is RankPhase.RUNNING


def test_sched_none_keeps_previous_scheduler_fields_and_ranks() -> None:
    sched = SchedulerInfo(job_id="9", state=JobState.RUNNING, nodelist="node[1-2]", elapsed_s=10,
                          start_time="t0")
    first = merge_status("9", sched, {0: _running(0)}, world_size=2)
    second = merge_status("9", None, None, world_size=2, previous=first)
    assert second.state is JobState.RUNNING
    assert second.nodelist == "node[1-2]"
    assert second.elapsed_s == 10
    assert second.start_time == "t0"
    assert second.ranks == first.ranks
    # fresh rank files replace the old ones; a scheduler answer without nodelist keeps it
    third = merge_status(
        "9", SchedulerInfo(job_id="9", state=JobState.COMPLETED, exit_code=0), {0: _exited(0), 1: _exited(1)},
        world_size=2, previous=second,
    )
    assert third.state is JobState.COMPLETED
    assert third.nodelist == "node[1-2]"
    assert third.elapsed_s == 10
    assert third.exit_code == 0
    assert [r.phase for r in third.ranks] == [RankPhase.EXITED, RankPhase.EXITED]


def test_ranks_beyond_world_size_are_kept_at_the_end() -> None:
    st = merge_status("10", SchedulerInfo(job_id="10", state=JobState.RUNNING),
                      {5: _running(5), 0: _running(0)}, world_size=2)
    assert [r.rank for r in st.ranks] == [0, 1, 5]


def test_first_failure_is_earliest_ended_failed_rank() -> None:
    ranks = {
        0: _failed(0, 1, ended=300.0),
        1: RankState(rank=1, phase=RankPhase.STOPPED, signal=15, ended_at=100.0),
        2: _failed(2, 7, ended=200.0, node="node9"),
        3: _failed(3, 9, ended=200.0),
        4: _exited(4, ended=50.0),
    }
    st = merge_status("11", SchedulerInfo(job_id="11", state=JobState.FAILED), ranks, world_size=5)
    first = st.first_failure
    assert first is not None
    assert (first.rank, first.exit_code, first.node) == (2, 7, "node9")


def test_first_failure_without_end_time_comes_last() -> None:
    st = JobStatus(job_id="1", state=JobState.FAILED, ranks=(
        RankState(rank=0, phase=RankPhase.FAILED, exit_code=1),
        _failed(5, 2, ended=999.0),
    ))
    assert st.first_failure is not None and st.first_failure.rank == 5
    assert JobStatus(job_id="1", state=JobState.FAILED, ranks=(_exited(0),)).first_failure is None


# --- summary_line -----------------------------------------------------------------------------


def test_summary_completed() -> None:
    sched = SchedulerInfo(job_id="42", state=JobState.COMPLETED, nodelist="node[1-2]", elapsed_s=65,
                          exit_code=0)
    st = merge_status("42", sched, {0: _exited(0), 1: _exited(1, node="node2")}, world_size=2)
    assert summary_line(st) == "job 42 COMPLETED in 00:01:05 on node[1-2]"


def test_summary_completed_without_nodelist() -> None:
    st = JobStatus(job_id="43", state=JobState.COMPLETED, elapsed_s=90061)
    assert summary_line(st) == "job 43 COMPLETED in 1-01:01:01"


def test_summary_256_rank_failure() -> None:
    ranks = {i: _running(i, node=f"node{i // 8 + 1}") for i in range(256)}
    ranks[137] = _failed(137, 7, ended=112.0, node="node18")
    sched = SchedulerInfo(job_id="41", state=JobState.FAILED, reason="NonZeroExitCode", elapsed_s=12,
                          exit_code=7, nodelist="node[1-32]")
    st = merge_status("41", sched, ranks, world_size=256)
    assert st.count(RankPhase.STOPPED) == 255
    assert st.count(RankPhase.RUNNING) == 0
    assert summary_line(st) == (
        "job 41 FAILED in 00:00:12 — first failure: rank 137 (node18) exit 7; 255 ranks stopped"
    )


def test_summary_failure_before_any_rank_ran() -> None:
    sched = SchedulerInfo(job_id="44", state=JobState.FAILED, reason="NonZeroExitCode", elapsed_s=1,
                          exit_code=1)
    st = merge_status("44", sched, {}, world_size=4)
    assert summary_line(st) == "job 44 FAILED in 00:00:01 — exit 1 before any rank ran (see the log)"


def test_summary_failure_after_ranks_started_but_none_failed() -> None:
    # the batch script failed after ranks were killed: no rank failed by itself
    sched = SchedulerInfo(job_id="45", state=JobState.FAILED, elapsed_s=3, exit_code=1)
    st = merge_status("45", sched, {0: _running(0)}, world_size=1)
    assert summary_line(st) == "job 45 FAILED in 00:00:03 — 1 rank stopped"


def test_summary_cancelled_and_timeout_give_reason() -> None:
    sched = SchedulerInfo(job_id="46", state=JobState.TIMEOUT, reason="TimeLimit", elapsed_s=600)
    st = merge_status("46", sched, {0: _running(0), 1: _running(1)}, world_size=2)
    assert summary_line(st) == "job 46 TIMEOUT in 00:10:00 — 2 ranks stopped; reason: TimeLimit"
    cancelled = merge_status("47", SchedulerInfo(job_id="47", state=JobState.CANCELLED, reason="None"),
                             {}, world_size=1)
    assert summary_line(cancelled) == "job 47 CANCELLED in --:--:--"


def test_describe_rank() -> None:
    assert describe_rank(_failed(3, 7, 1.0, node="n1")) == "rank 3 (n1) exit 7"
    stopped = RankState(rank=4, phase=RankPhase.STOPPED, signal=15)
    assert describe_rank(stopped) == "rank 4 stopped by signal 15"
    assert describe_rank(RankState(rank=5, phase=RankPhase.STOPPED)) == "rank 5 stopped by signal 9"
    assert describe_rank(_running(6, node="n2")) == "rank 6 (n2) running"


def test_a_rank_killed_by_its_own_signal_is_the_first_failure() -> None:
    from jupyter_tiers.batch.status import summary_line
    from jupyter_tiers.core.model import JobState, JobStatus, RankPhase, RankState

    ranks = (
        RankState(rank=0, phase=RankPhase.STOPPED, node="node1", signal=15, ended_at=12.0),
        RankState(rank=1, phase=RankPhase.FAILED, node="node2", signal=6, ended_at=10.0),
    )
    status = JobStatus(job_id="9", state=JobState.FAILED, elapsed_s=3, ranks=ranks, world_size=2)
    assert status.first_failure == ranks[1]
    assert summary_line(status) == (
        "job 9 FAILED in 00:00:03 — first failure: rank 1 (node2) killed by SIGABRT (6); "
        "1 rank stopped"
    )
