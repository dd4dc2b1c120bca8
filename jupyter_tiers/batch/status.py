"""Pure logic that turns what a tier observed into a JobStatus and a one-line summary."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..core.model import JobState, JobStatus, RankPhase, RankState, SchedulerInfo
from ..core.timefmt import format_elapsed
from .metrics import format_value
from .requeue import BETWEEN_RUNS, RAN_STATES, restart_count, summary_restarts


def ended_ids(sched: Mapping[str, SchedulerInfo]) -> set[str]:
    """The jobs the scheduler says ended: their rank files are read once more after its answer
    (an end is final, and a rank may have recorded its exit after the first read)."""
    return {job_id for job_id, info in sched.items() if info.state.terminal}


def merge_status(
    job_id: str,
    sched: SchedulerInfo | None,
    ranks: Mapping[int, RankState] | None,
    world_size: int,
    previous: JobStatus | None = None,
    *,
    restarts: int = 0,
    ranks_read_first: bool = False,
) -> JobStatus:
    """Combine the scheduler's view and the rank files into one JobStatus.

    When the scheduler could not be asked (``sched`` is None) the previous scheduler fields are
    kept. ``restarts`` is what the registry knew of the job's restarts (a reattach between a
    requeued job's runs, before its rank files say so). ``ranks_read_first`` says the rank files
    were read before the scheduler was asked: a scheduler that then says the job waits, while a
    rank of its latest run had started, means the job was requeued (nobody watched it run: a
    notebook that was closed). Once the job is over, ranks that started but recorded no end were
    killed outright (SIGKILL after the kill wait) and are shown as stopped.
    """
    base = previous or JobStatus(job_id=job_id, state=JobState.PENDING, world_size=world_size)
    restarts = max(base.restarts, restarts)
    counted = False
    if (sched is not None and previous is not None and previous.state in RAN_STATES
            and sched.state in BETWEEN_RUNS and sched.start_time != previous.start_time):
        restarts += 1  # requeued (preempted, node failure, scontrol requeue): a new run is coming
        counted = True
    if sched is not None:
        base = replace(
            base,
            state=sched.state,
            reason=sched.reason,
            # While COMPLETING, Slurm lists only the nodes still cleaning up: keep the full list.
            nodelist=(base.nodelist if sched.state is JobState.COMPLETING and base.nodelist
                      else sched.nodelist or base.nodelist),
            start_time=sched.start_time,
            end_time=sched.end_time or base.end_time,
            elapsed_s=sched.elapsed_s if sched.elapsed_s is not None else base.elapsed_s,
            exit_code=sched.exit_code if sched.exit_code is not None else base.exit_code,
            checkpoint=sched.checkpoint or base.checkpoint,
        )
    rank_map = dict(ranks) if ranks is not None else {r.rank: r for r in base.ranks}
    full = [rank_map.get(i, RankState(rank=i)) for i in range(world_size)]
    extra = [r for k, r in sorted(rank_map.items()) if k >= world_size]
    all_ranks = full + extra
    restarts = restart_count(all_ranks, restarts)
    if (ranks_read_first and not counted and ranks is not None and sched is not None
            and sched.state in BETWEEN_RUNS and not sched.state.terminal
            and any(r.attempt == restarts and r.phase is not RankPhase.WAITING for r in all_ranks)):
        # Slurm runs a job's ranks only once it is allocated: asked after they started, it says
        # "pending" only of a job that was requeued since. (PREEMPTED without a requeue is an end.)
        restarts += 1
    # A rank whose last state is from an earlier run waits for this run's start.
    all_ranks = [r if r.attempt >= restarts else RankState(rank=r.rank, attempt=restarts)
                 for r in all_ranks]
    if sched is not None and sched.state is JobState.NODE_FAIL and sched.failed_nodes:
        base = replace(base, reason=node_failure_reason(sched.failed_nodes, all_ranks))
    if base.state.terminal:
        all_ranks = [
            replace(r, phase=RankPhase.STOPPED) if r.phase is RankPhase.RUNNING else r
            for r in all_ranks
        ]
    elif base.state in (JobState.PENDING, JobState.UNKNOWN) and any(
        r.phase is not RankPhase.WAITING for r in all_ranks
    ):
        # The rank files prove it runs before the scheduler query says so.
        base = replace(base, state=JobState.RUNNING, reason=None)
    return replace(base, ranks=tuple(all_ranks), world_size=world_size, restarts=restarts)


def node_failure_reason(failed: Sequence[tuple[str, str]], ranks: Sequence[RankState]) -> str:
    """``node failure: node2 (rank 1) down: Not responding``: which node the scheduler gave up,
    the ranks that ran there (from the rank files) and why."""
    parts = []
    for node, why in failed:
        on = [r.rank for r in ranks if r.node == node]
        where = f" (rank{'s' if len(on) > 1 else ''} {', '.join(map(str, on))})" if on else ""
        parts.append(f"{node}{where} {why}")
    return "node failure: " + "; ".join(parts)


def _signal_name(number: int) -> str:
    import signal

    try:
        return f"{signal.Signals(number).name} ({number})"
    except ValueError:
        return f"signal {number}"


def describe_rank(rank: RankState) -> str:
    """"rank 137 (node18) exit 7" style text."""
    where = f" ({rank.node})" if rank.node else ""
    if rank.phase is RankPhase.FAILED and rank.exit_code is None and rank.signal:
        return f"rank {rank.rank}{where} killed by {_signal_name(rank.signal)}"
    if rank.phase is RankPhase.FAILED:
        return f"rank {rank.rank}{where} exit {rank.exit_code}"
    if rank.phase is RankPhase.STOPPED:
        return f"rank {rank.rank}{where} stopped by signal {rank.signal or 9}"
    return f"rank {rank.rank}{where} {rank.phase.value}"


def failure_reason(status: JobStatus) -> str:
    """Why a job that ended without completing ended, in a few words for a list row: the first
    failing rank (``rank 3 (node2) exit 1``), ``exit 2 before any rank ran``, or the
    scheduler's reason (``TimeLimit``); "" for a job that completed or has not ended, or when
    nothing is known."""
    if not status.state.terminal or status.state is JobState.COMPLETED:
        return ""
    first = status.first_failure
    if first is not None:
        return f"first failure: {describe_rank(first)}"
    reason = status.reason if status.reason and status.reason != "None" else ""
    if status.state is JobState.FAILED and status.exit_code not in (None, 0):
        ran = any(r.phase.done for r in status.ranks)
        return f"exit {status.exit_code}" + ("" if ran else " before any rank ran")
    return reason


def ended_entry(status: JobStatus) -> dict[str, Any] | None:
    """What a job's registry ``detail`` keeps of its end (its one entry ``ended``, written once
    its final state is seen; Registry.record_end): the failure reason and run time, which a list
    row read from the record alone shows (``ended_of``), and the first failed rank (rank, node,
    exit code, signal, or None), which History names (``ended_failure``). None while the job
    runs on."""
    if not status.state.terminal:
        return None
    first = status.first_failure
    failure = None if first is None else {"rank": first.rank, "node": first.node or "",
                                          "exit": first.exit_code, "signal": first.signal}
    return {"reason": failure_reason(status), "elapsed_s": status.elapsed_s, "failure": failure}


def _ended(detail: Mapping[str, Any]) -> Mapping[str, Any]:
    ended = detail.get("ended")
    return ended if isinstance(ended, dict) else {}


def ended_of(detail: Mapping[str, Any]) -> tuple[str, int | None]:
    """``(reason, elapsed_s)`` from the entries of a job's ``detail`` (``ended_entry``); ``("",
    None)`` when absent or malformed."""
    ended = _ended(detail)
    reason, elapsed = ended.get("reason"), ended.get("elapsed_s")
    ok = isinstance(elapsed, int) and not isinstance(elapsed, bool) and elapsed >= 0
    return (reason[:500] if isinstance(reason, str) else ""), (elapsed if ok else None)


def ended_failure(detail: Mapping[str, Any]) -> str:
    """The first failed rank kept in a job's ``detail`` (``ended_entry``), as History's EXIT
    column says it (``failure_words``); "" when none is kept."""
    return failure_words(_ended(detail).get("failure"))


def failure_words(entry: Any) -> str:
    """A first failed rank (``ended_entry``'s ``failure``) as the widget's legend says it:
    ``rank 3 exit 1``, ``rank 3 killed by SIGKILL (9)``; "" for anything that is not one (a
    record written by another version)."""
    if not isinstance(entry, dict):
        return ""
    rank, code, sig = entry.get("rank"), entry.get("exit"), entry.get("signal")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        return ""
    if isinstance(code, int) and not isinstance(code, bool):
        return f"rank {rank} exit {code}"
    if isinstance(sig, int) and not isinstance(sig, bool) and sig > 0:
        return f"rank {rank} killed by {_signal_name(sig)}"
    return f"rank {rank} failed"


# States whose summary carries the log's first error line (a cancel or time limit says why itself).
_ERROR_STATES = frozenset({JobState.FAILED, JobState.OUT_OF_MEMORY, JobState.NODE_FAIL, JobState.BOOT_FAIL})


def summary_line(status: JobStatus, *, metric: tuple[str, float] | None = None,
                 error: str | None = None, why: str | None = None, used: str | None = None) -> str:
    """The one line printed when a job ends, e.g.

    ``job 41 FAILED in 00:00:12 — first failure: rank 137 (node18) exit 7; 255 ranks stopped``
    ``job 42 COMPLETED in 00:00:42 on node[1-2] — checkpoint /scratch/ckpt/ft/42/checkpoints/ckpt-000100.pt``

    With what the log showed (metrics.MetricsTracker): ``metric``, the main metric's last value
    (``— loss 0.0123``, ``; last loss 2.31`` for a job that did not complete), and ``error``, the
    first error line, shown for a job that failed (``— RuntimeError: CUDA error: out of memory``).
    ``why``: why it ended with the fix (endreason.EndReason.line, ``why: … — fix: …``), shown in
    place of ``error`` for a job that did not complete. ``used``: what it used of what it asked
    for (efficiency.py, ``CPU 38 % of 16 cores over 2 h 10 min; ...``), last, once it ended.
    """
    head = (f"job {status.job_id} {status.state.value}{summary_restarts(status.restarts)}"
            f" in {format_elapsed(status.elapsed_s)}")
    tail = f" — {used}" if used and status.state.terminal else ""
    if status.state is JobState.COMPLETED:
        return (head + (f" on {status.nodelist}" if status.nodelist else "")
                + (f" — {metric[0]} {format_value(metric[1])}" if metric else "")
                + (f" — checkpoint {status.checkpoint}" if status.checkpoint else "") + tail)
    first = status.first_failure
    stopped = status.count(RankPhase.STOPPED)
    details: list[str] = []
    if first is not None:
        details.append(f"first failure: {describe_rank(first)}")
    elif status.state is JobState.FAILED and not any(r.phase.done for r in status.ranks):
        details.append(f"exit {status.exit_code} before any rank ran (see the log)")
    if stopped:
        details.append(f"{stopped} rank{'s' if stopped != 1 else ''} stopped")
    if status.state is not JobState.FAILED and status.reason and status.reason != "None":
        details.append(f"reason: {status.reason}")
    if metric and status.state.terminal:
        details.append(f"last {metric[0]} {format_value(metric[1])}")
    line = head + (" — " + "; ".join(details) if details else "")
    if why and status.state.terminal:
        line += f" — {why}"
    elif error and status.state in _ERROR_STATES:
        line += f" — {error}"
    return line + tail
