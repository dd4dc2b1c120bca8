"""Arrays and sweeps on the local tier, through the magic and %tiers: params delivered, the
concurrency limit, the summary, one task cancelled, the one-line listing and its expansion."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_tiers import api
from jupyter_tiers.core.model import JobState
from jupyter_tiers.engine.array_job import ArrayJob
from jupyter_tiers.faces import tiers_command
from tests import helpers

SWEEP = textwrap.dedent(
    """\
    import json, os, time
    print("JT_PARAMS", os.environ["JT_PARAMS"], flush=True)
    task = os.environ["SLURM_ARRAY_TASK_ID"]
    print("task", task, "params", json.dumps(params, sort_keys=True))
    top = os.path.join(os.environ["JT_JOB_DIR"], "..", "..")
    open(os.path.join(top, "running-" + task), "w").close()
    time.sleep(0.3)
    print("concurrent", len([n for n in os.listdir(top) if n.startswith("running-")]), flush=True)
    os.remove(os.path.join(top, "running-" + task))
    if params["lr"] == 0.3 and params["bs"] == 64:
        raise ValueError("diverged")
    print(f"loss={params['lr'] + params['bs'] / 1000:.4f}")
    """
)


@pytest.fixture
def ip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    helpers.isolate_tiers(tmp_path, monkeypatch)
    shell = helpers.tiers_shell()
    yield shell
    helpers.cancel_registered_jobs()


def test_sweep_runs_every_task_with_its_params_under_the_limit(ip, capsys) -> None:  # type: ignore[no-untyped-def]
    ip.user_ns["grid"] = "lr=0.1,0.3 bs=32,64"
    ip.run_cell_magic("slurm_train", '--name sw --sweep "{grid}" --array %2 --wait --out job', SWEEP)
    out = capsys.readouterr().out
    job = ip.user_ns["job"]
    assert isinstance(job, ArrayJob)
    assert out.startswith(f"sweep {job.id} (sw) submitted to local: 4 tasks of 1 rank, at most 2 at once")
    assert "[task 3 lr=0.3 bs=64] FAILED" in out
    summary = out.strip().splitlines()[-1]
    assert summary.startswith(f"array {job.id} (4 tasks) 3 COMPLETED, 1 FAILED (task 3: rank 0 "
                              "(local0) exit 1 — ValueError: diverged)"), summary
    assert summary.endswith("; best loss 0.132 at lr=0.1 bs=32"), summary
    want = [{"lr": 0.1, "bs": 32}, {"lr": 0.1, "bs": 64}, {"lr": 0.3, "bs": 32}, {"lr": 0.3, "bs": 64}]
    most = 0
    for i, params in enumerate(want):
        log = job.task(i).logs(rank=0)
        assert json.loads(log.split("JT_PARAMS ", 1)[1].splitlines()[0]) == params
        assert f"task {i} params {json.dumps(params, sort_keys=True)}" in log
        most = max(most, int(log.split("concurrent ", 1)[1].split()[0]))
    assert 1 <= most <= 2  # never more than the limit at once
    # %tiers jobs: the array is one line with counts; %tiers jobs ID: a row per task.
    tiers_command.run(["jobs"])
    listing = capsys.readouterr().out
    rows = [ln for ln in listing.splitlines() if ln.startswith(job.id + " ")]
    assert len(rows) == 1 and "4 tasks: 3 COMPLETED, 1 FAILED" in rows[0] and "FAILED" in rows[0]
    tiers_command.run(["jobs", job.id])
    expanded = capsys.readouterr().out.splitlines()
    header = next(i for i, ln in enumerate(expanded) if ln.startswith("TASK"))
    assert expanded[header].split() == ["TASK", "PARAMS", "STATE", "ELAPSED", "EXIT", "METRIC"]
    task_rows = [ln.split() for ln in expanded[header + 1:]]
    assert [r[:4] for r in task_rows] == [
        ["0", "lr=0.1", "bs=32", "COMPLETED"], ["1", "lr=0.1", "bs=64", "COMPLETED"],
        ["2", "lr=0.3", "bs=32", "COMPLETED"], ["3", "lr=0.3", "bs=64", "FAILED"]]
    assert task_rows[0][-2:] == ["loss", "0.132"]
    # One task's log by its Slurm name.
    tiers_command.run(["logs", f"{job.id}_2", "--rank", "0"])
    assert '"lr": 0.3' in capsys.readouterr().out
    tiers_command.run(["logs", job.id, "--task", "1", "--tail", "1"])
    assert capsys.readouterr().out == "0: loss=0.1640\n"
    with pytest.raises(tiers_command.CommandUsage, match="--task takes a task number"):
        tiers_command.run(["cancel", f"{job.id}_1", "--task", "1"])


def test_plain_array_gets_the_task_number_and_one_task_is_cancelled(ip, capsys) -> None:  # type: ignore[no-untyped-def]
    body = ("import os, time\nprint('params', params, os.environ['JT_PARAMS'], flush=True)\n"
            "time.sleep(0 if params['task'] != 5 else 300)\n")
    ip.run_cell_magic("slurm_train", "--name arr --array 1,3,5 --out job", body)
    capsys.readouterr()
    job = ip.user_ns["job"]
    assert [t.id for t in job.tasks] == [f"{job.id}_1", f"{job.id}_3", f"{job.id}_5"]
    helpers.wait_for(lambda: job.task_statuses()[5].state is JobState.RUNNING, timeout=60)
    tiers_command.run(["cancel", f"{job.id}_5"])
    status = job.wait(timeout=60)
    assert status.state is JobState.CANCELLED and status.reason == "3 tasks: 2 COMPLETED, 1 CANCELLED"
    assert "params {'task': 3} {\"task\": 3}" in job.task(3).logs(rank=0)
    assert job.summary() == f"array {job.id} (3 tasks) 2 COMPLETED, 1 CANCELLED"
    from jupyter_tiers.app import (
        actions,  # the sidebar's and the REST API's row: one line, the counts
    )

    item = next(i for i in actions.list_items().items if i.id == job.id)
    assert item.size == "3 tasks: 2 COMPLETED, 1 CANCELLED" and item.state == "CANCELLED"
    assert item.summary == f"array {job.id} CANCELLED — 3 tasks: 2 COMPLETED, 1 CANCELLED"


def test_cancel_the_whole_array_cancels_waiting_tasks_at_once(ip, capsys) -> None:  # type: ignore[no-untyped-def]
    ip.run_cell_magic("slurm_train", "--name slow --array 0-5%1 --out job", "import time\ntime.sleep(300)\n")
    job = ip.user_ns["job"]
    helpers.wait_for(lambda: job.task_statuses()[0].state is JobState.RUNNING, timeout=60)
    assert [s.state for s in job.task_statuses().values()][1:] == [JobState.PENDING] * 5
    tiers_command.run(["cancel", job.id])
    assert "cancel requested for array" in capsys.readouterr().out
    status = job.wait(timeout=60)
    assert status.state is JobState.CANCELLED and status.reason == "6 tasks: 6 CANCELLED"
    api.close_all()


def test_dry_run_of_an_array_says_what_would_run(ip, capsys) -> None:  # type: ignore[no-untyped-def]
    from jupyter_tiers.config.registry import Registry

    ip.run_cell_magic("slurm_train", '--sweep "lr=1,2 bs=3" --array %1 --dry-run', "print(params)\n")
    out = capsys.readouterr().out
    assert out.startswith("#!/bin/bash\n# An array of 2 tasks, at most 1 at once (lr=1 bs=3, lr=2 bs=3)")
    assert Registry().list() == []
