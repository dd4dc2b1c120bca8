"""Job arrays and sweeps on the real Slurm cluster: params per task, the summary, cancelling one
task, and a scheduler load that does not grow with the number of tasks."""

from __future__ import annotations

import functools
import json
import textwrap

import pytest

from jupyter_tiers.core.model import JobState
from jupyter_tiers.engine.array_job import ArrayJob
from jupyter_tiers.slurm.tier import SlurmTier
from tests import helpers

# In the lane beside the slurm lane (tests/run.sh), sharing the cluster.
pytestmark = [pytest.mark.cluster, pytest.mark.slurm_beside]

wait_for = functools.partial(helpers.wait_for, interval=0.5)

SWEEP_BODY = textwrap.dedent(
    """\
    import json, os
    print("JT_PARAMS", os.environ["JT_PARAMS"], flush=True)
    print("params", json.dumps(params, sort_keys=True), flush=True)
    if params["lr"] == 0.2 and params["bs"] == 64:
        raise ValueError("lr too high for bs 64")
    print(f"loss={params['lr'] * 10 + params['bs'] / 1000:.4f}", flush=True)
    """
)


def test_sweep_delivers_params_and_summarises(box: SlurmTier) -> None:
    job = box.submit(box.make_spec(SWEEP_BODY, name="sweep", sweep="lr=0.1,0.2 bs=32,64", array="%2"))
    assert isinstance(job, ArrayJob)
    assert "#SBATCH --array=0-3%2" in job.script
    status = job.wait(timeout=300)
    assert status.state is JobState.FAILED, job.logs()
    tasks = job.task_statuses()
    assert [tasks[i].state for i in range(4)] == [JobState.COMPLETED, JobState.COMPLETED,
                                                  JobState.COMPLETED, JobState.FAILED]
    expected = [{"lr": 0.1, "bs": 32}, {"lr": 0.1, "bs": 64}, {"lr": 0.2, "bs": 32}, {"lr": 0.2, "bs": 64}]
    for i, want in enumerate(expected):
        log = job.task(i).logs(rank=0)
        got = json.loads(log.split("JT_PARAMS ", 1)[1].splitlines()[0])
        assert got == want, log
        assert f"params {json.dumps(want, sort_keys=True)}" in log
    summary = job.summary(tasks=tasks)
    assert summary.startswith(f"array {job.id} (4 tasks) 3 COMPLETED, 1 FAILED (task 3: rank 0"), summary
    assert "ValueError: lr too high for bs 64" in summary
    assert summary.endswith("best loss 1.032 at lr=0.1 bs=32"), summary
    record = box.registry.get(job.id)
    assert record.state == "FAILED" and "4 tasks: 3 COMPLETED, 1 FAILED" in (record.detail or "")


def test_cancel_one_task_then_all(box: SlurmTier) -> None:
    body = "import os, time\nprint('task', os.environ['SLURM_ARRAY_TASK_ID'], flush=True)\ntime.sleep(300)\n"
    job = box.submit(box.make_spec(body, name="arr-cancel", array="0-2"))
    assert isinstance(job, ArrayJob)
    wait_for(lambda: all(s.state is JobState.RUNNING for s in job.task_statuses().values()), timeout=180)
    # RUNNING is the scheduler's word: a task's program may print its line seconds later.
    wait_for(lambda: all(f"task {i}" in job.task(i).logs(rank=0) for i in (0, 2)), timeout=180)
    job.task(1).cancel()
    wait_for(lambda: job.task_statuses()[1].state is JobState.CANCELLED, timeout=120)
    tasks = job.task_statuses()
    assert tasks[0].state is JobState.RUNNING and tasks[2].state is JobState.RUNNING
    assert "task 0" in job.task(0).logs(rank=0) and "task 2" in job.task(2).logs(rank=0)
    job.cancel()
    status = job.wait(timeout=120)
    assert status.state is JobState.CANCELLED
    assert status.reason == "3 tasks: 3 CANCELLED"


def _commands_per_poll(tier: SlurmTier, records: list) -> int:
    count = [0]
    transport = tier.transport
    real = transport.run

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        count[0] += 1
        return real(*args, **kwargs)

    transport.run = counting  # type: ignore[method-assign]
    try:
        tier.poll_scheduler(records)
        tier.poll_ranks(records)
    finally:
        transport.run = real  # type: ignore[method-assign]
    return count[0]


def test_scheduler_load_does_not_grow_with_tasks(box: SlurmTier) -> None:
    # Held arrays: every task stays in squeue, so the count compares like with like.
    small = box.submit(box.make_spec("print(1)", name="arr-2", array="0-1", sbatch_options=("--hold",)))
    large = box.submit(box.make_spec("print(1)", name="arr-24", array="0-23", sbatch_options=("--hold",)))
    assert isinstance(small, ArrayJob) and isinstance(large, ArrayJob)
    small_records, large_records = small.task_records(), large.task_records()
    assert len(large_records) == 24
    found = box.poll_scheduler(large_records)
    assert sorted(found) == sorted(r.job_id for r in large_records)
    assert all(info.state is JobState.PENDING for info in found.values())
    assert _commands_per_poll(box, small_records) == _commands_per_poll(box, large_records) == 2
    # The watcher's tick with both arrays watched is the same two commands.
    assert _commands_per_poll(box, small_records + large_records) == 2
    small.cancel()
    large.cancel()
    assert large.wait(timeout=120).state is JobState.CANCELLED


def test_a_watched_array_record_is_one_batch_whatever_its_size(box: SlurmTier) -> None:
    """The sidebar's hub watches an array's record itself: each watcher tick asks about all its
    tasks with the same two commands (squeue -r, rank files), for 2 tasks or for 26."""
    from jupyter_tiers.core.model import JobStatus
    from jupyter_tiers.engine.watch import Watcher

    small = box.submit(box.make_spec("print(1)", name="w-2", array="0-1", sbatch_options=("--hold",)))
    large = box.submit(box.make_spec("print(1)", name="w-24", array="0-23", sbatch_options=("--hold",)))
    watcher = Watcher(box, first_poll=0.0)
    watcher._ensure_thread = lambda: None  # type: ignore[method-assign]  # ticks run here, one by one
    seen: dict[str, list[JobStatus]] = {small.id: [], large.id: []}
    watcher.watch(small.record, on_status=seen[small.id].append, follow_logs=False)

    def tick() -> int:
        count = [0]
        real = box.transport.run

        def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
            count[0] += 1
            return real(*args, **kwargs)

        box.transport.run = counting  # type: ignore[method-assign]
        try:
            watcher._cycle()
        finally:
            box.transport.run = real  # type: ignore[method-assign]
        return count[0]

    assert tick() == 2
    assert seen[small.id][-1].state is JobState.PENDING and seen[small.id][-1].reason == "2 tasks: 2 PENDING"
    watcher.watch(large.record, on_status=seen[large.id].append, follow_logs=False)
    assert tick() == 2
    assert seen[large.id][-1].reason == "24 tasks: 24 PENDING"
    small.cancel()
    large.cancel()
    wait_for(lambda: tick() and seen[large.id][-1].state.terminal and seen[small.id][-1].state.terminal,
             timeout=120)
    assert seen[large.id][-1].state is JobState.CANCELLED
    record = box.registry.get(large.id)
    assert record.state == "CANCELLED" and "24 tasks: 24 CANCELLED" in (record.detail or "")
    watcher.stop()
