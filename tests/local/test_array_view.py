"""ArrayView's Python side on a real local array: a row per task, the summary, selecting a task
opens its own JobView, and the front end's messages cancel one task or all."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.model import JobState
from jupyter_tiers.engine.array_job import ArrayJob
from jupyter_tiers.faces.widgets.array_view import ArrayView
from jupyter_tiers.faces.widgets.job_view import JobView
from jupyter_tiers.local.tier import LocalTier
from tests import helpers

from .test_local_tier import FAST, local_profile


@pytest.fixture
def tier(tmp_path: Path) -> Iterator[LocalTier]:
    t = LocalTier(local_profile(tmp_path / "jobs"), Registry(tmp_path / "r.sqlite"), watcher_options=FAST)
    yield t
    for rec in t.registry.list(limit=100):
        ArrayJob(t, rec).cancel()
    t.close()


BODY = """\
import time
if params["lr"] == 2:
    raise ValueError("lr 2 diverged")
if params["lr"] == 3:
    time.sleep(300)
print(f"loss={params['lr'] / 10}")
"""


def test_rows_summary_select_and_cancel_one_task(tier: LocalTier) -> None:
    job = tier.submit(tier.make_spec(BODY, name="view", sweep="lr=1,2,3"))
    assert isinstance(job, ArrayJob)
    view = ArrayView(job)
    try:
        helpers.wait_for(lambda: [r[2] for r in view.table.tasks] == ["COMPLETED", "FAILED", "RUNNING"],
                         timeout=60)
        assert [r[1] for r in view.table.tasks] == ["lr=1", "lr=2", "lr=3"]
        view._on_front_end_msg(view.table, {"kind": "select", "task": 1}, None)
        assert view.table.selected == 1 and isinstance(view.task_view, JobView)
        assert view.task_view.job.id == f"{job.id}_1" and list(view.children) == [view.table, view.task_view]
        view._on_front_end_msg(view.table, {"kind": "select", "task": True}, None)  # ignored
        view._on_front_end_msg(view.table, {"kind": "cancel_task", "task": 99}, None)  # no such task
        view._on_front_end_msg(view.table, {"kind": "cancel_task", "task": 2}, None)
        status = view.wait(timeout=60)
        assert status is not None and status.state is JobState.FAILED
        rows = view.table.tasks
        assert [r[2] for r in rows] == ["COMPLETED", "FAILED", "CANCELLED"]
        assert rows[0][4] == "loss 0.1" and rows[1][5].startswith("rank 0 (local0) exit 1 — ValueError")
        assert view.summary == (f"array {job.id} (3 tasks) 1 COMPLETED, 1 FAILED (task 1: rank 0 (local0) "
                                "exit 1 — ValueError: lr 2 diverged), 1 CANCELLED; best loss 0.1 at lr=1")
        assert view.table.state == "FAILED"
        assert view.table.counts == "3 tasks: 1 COMPLETED, 1 FAILED, 1 CANCELLED"
        view.select(1)  # a second click hides the task view
        assert view.task_view is None and list(view.children) == [view.table]
    finally:
        view.close()


def test_cancel_all_from_the_front_end(tier: LocalTier) -> None:
    job = tier.submit(tier.make_spec("import time\ntime.sleep(300)\n", name="all", array="0-2%1"))
    assert isinstance(job, ArrayJob)
    view = ArrayView(job)
    try:
        helpers.wait_for(lambda: view.table.tasks[0][2] == "RUNNING", timeout=60)
        view._on_front_end_msg(view.table, {"kind": "cancel"}, None)
        assert view.table.cancel_requested
        status = view.wait(timeout=60)
        assert status is not None and status.state is JobState.CANCELLED
        assert view.table.counts == "3 tasks: 3 CANCELLED" and view.table.terminal
    finally:
        view.close()


def test_a_refused_cancel_is_shown_and_may_be_tried_again(tier: LocalTier,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A refusal (on Slurm: another user's job) reaches the table's message, not a thread's
    traceback, and Cancel all becomes pressable again. The refusal is simulated: a local job is
    always the user's own."""
    from jupyter_tiers.core.errors import TiersError

    job = tier.submit(tier.make_spec("import time\ntime.sleep(300)\n", name="refused", array="0-1"))
    assert isinstance(job, ArrayJob)
    view = ArrayView(job)

    def refuse(*_args: object) -> None:
        raise TiersError(f"cannot cancel job {job.id} on local: scancel: Access/permission denied")

    try:
        monkeypatch.setattr(ArrayJob, "cancel", refuse)
        view._on_front_end_msg(view.table, {"kind": "cancel"}, None)
        helpers.wait_for(lambda: "Access/permission denied" in view.table.message, timeout=30)
        assert not view.table.cancel_requested and not view.table.terminal
        monkeypatch.setattr(type(job.task(0)), "cancel", refuse)
        view.table.message = ""
        view._on_front_end_msg(view.table, {"kind": "cancel_task", "task": 0}, None)
        helpers.wait_for(lambda: "Access/permission denied" in view.table.message, timeout=30)
    finally:
        monkeypatch.undo()
        view.close()
