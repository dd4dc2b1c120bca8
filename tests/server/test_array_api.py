"""A job array through the API on the real local tier: its details carry the notebook ArrayView's
task table (a row per task, counts, summary), a task is addressed as ``ID_i`` (details, cancel),
and cancelling one task leaves the others running."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers import api
from tests.server.util import body

API = ("jupyter-tiers", "api")
GUARD = 90.0

BODY = """\
import time
if params["lr"] == 2:
    raise ValueError("lr 2 diverged")
if params["lr"] >= 3:
    time.sleep(300)
print(f"loss={params['lr'] / 10}", flush=True)
"""


@pytest.fixture
def local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiers_config: Any) -> Any:
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    tiers_config({"profiles": {"laptop": {"tier": "local"}}})
    tier = api.connect("laptop")
    try:
        yield tier
    finally:
        for rec in tier.registry.list(limit=100):
            tier.handle(rec).stop()
        api.close_all()


async def _until(fetch: Any, cond: Any, what: str) -> Any:
    deadline = time.monotonic() + GUARD
    last = None
    while True:
        last = body(await fetch())
        if cond(last):
            return last
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}; last answer {last!r}"[:3000])
        await asyncio.sleep(0.2)


async def test_array_details_rows_and_one_task_cancelled(jp_fetch: Any, local: Any) -> None:
    job = local.submit(local.make_spec(BODY, name="swept", sweep="lr=1,2,3,4"))
    array_id = job.id

    def details() -> Any:
        return jp_fetch(*API, "jobs", "laptop", array_id)

    def states(d: Any) -> list[str]:
        return [row[2] for row in d["view"]["tasks"]]

    first = await _until(details, lambda d: states(d) == ["COMPLETED", "FAILED", "RUNNING", "RUNNING"],
                         "tasks 0 and 1 to end, 2 and 3 to run")
    assert first["view_kind"] == "array" and first["kind"] == "job" and first["id"] == array_id
    view = first["view"]
    assert [row[0] for row in view["tasks"]] == [0, 1, 2, 3]
    assert [row[1] for row in view["tasks"]] == ["lr=1", "lr=2", "lr=3", "lr=4"]
    assert view["sweep"] is True and view["limit"] == 0 and view["array_name"] == "swept"
    assert view["state"] == "RUNNING" and view["terminal"] is False and view["summary"] == ""
    assert view["counts"] == "4 tasks: 2 RUNNING, 1 COMPLETED, 1 FAILED"
    assert view["tasks"][0][4] == "loss 0.1"  # the ended task's last metric, from its log
    assert view["tasks"][1][5].startswith("rank 0 (local0) exit 1 — ValueError: lr 2 diverged")

    # A task is `jobs/{profile}/{ID_i}`: its own job details (JobView traits), its own cancel.
    task = body(await jp_fetch(*API, "jobs", "laptop", f"{array_id}_2"))
    assert task["view_kind"] == "job" and task["id"] == f"{array_id}_2"
    assert task["view"]["job_id"] == f"{array_id}_2" and task["view"]["state"] == "RUNNING"
    logs = body(await jp_fetch(*API, "jobs", "laptop", f"{array_id}_0", "logs"))
    assert [line[1] for line in logs["lines"]] == ["loss=0.1"], "task 0's log alone"
    result = body(await jp_fetch(*API, "jobs", "laptop", f"{array_id}_2", "cancel", method="POST", body=b""))
    assert result["ok"] is True and f"{array_id}_2" in result["message"]

    after = await _until(details, lambda d: states(d)[2] == "CANCELLED", "task 2 to be cancelled")
    assert states(after)[3] == "RUNNING", "cancelling one task left the others alone"
    # Cancel all is the array's own cancel.
    result = body(await jp_fetch(*API, "jobs", "laptop", array_id, "cancel", method="POST", body=b""))
    assert result["ok"] is True and f"array {array_id}" in result["message"]
    done = await _until(details, lambda d: d["view"]["terminal"], "the array to end")
    assert states(done) == ["COMPLETED", "FAILED", "CANCELLED", "CANCELLED"]
    assert done["state"] == "FAILED" and done["view"]["state"] == "FAILED"
    assert done["view"]["summary"].startswith(f"array {array_id} (4 tasks) 1 COMPLETED, 1 FAILED (task 1: ")
    assert "best loss 0.1 at lr=1" in done["view"]["summary"]


async def test_an_unknown_task_is_a_404(jp_fetch: Any, local: Any) -> None:
    from tornado.httpclient import HTTPClientError

    job = local.submit(local.make_spec("print('hi')\n", name="arr", array="0-1"))
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch(*API, "jobs", "laptop", f"{job.id}_9")
    assert err.value.code == 404
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch(*API, "jobs", "laptop", f"{job.id}_9", "cancel", method="POST", body=b"")
    assert err.value.code == 404


def test_an_open_array_panel_reads_its_tasks_from_the_shared_watch(
        local: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``refresh=0`` (the panel's re-read on every change) answers an array's task table from the
    hub's watch of the array: no scheduler query, whatever the number of reads."""
    from jupyter_tiers.faces.server.hub import Hub
    from tests.server.test_hub import Inbox, _until, count_scheduler_queries

    hub = Hub(scan_interval=0.2)
    job = local.submit(local.make_spec("import time\ntime.sleep(300)\n", name="watched", array="0-2"))
    token, _snapshot = hub.listen(Inbox())
    try:
        _until(lambda: hub.watched() == [job.key], "the array to be watched")
        _until(lambda: len(local.watcher.array_tasks(job.key)) == 3
               and hub.cached_status(job.key) is not None, "the watch's task statuses")
        queries = count_scheduler_queries(local, monkeypatch)
        for _ in range(5):
            detail = hub.details(job.key, refresh=False)
            assert detail["view_kind"] == "array" and len(detail["view"]["tasks"]) == 3
            assert [row[0] for row in detail["view"]["tasks"]] == [0, 1, 2]
            assert all(row[2] in ("PENDING", "RUNNING") for row in detail["view"]["tasks"])
        assert queries == []
        hub.details(job.key)  # an explicit refresh asks the tier: one batch for the three tasks
        assert queries == [3]
    finally:
        hub.unlisten(token)
        hub.stop()


async def test_a_task_is_a_job_for_the_service_verbs(jp_fetch: Any, local: Any) -> None:
    """``DELETE``, ``scale`` and ``restart`` of an array task (``ID_i``) are 409s like a job's,
    and the task keeps running (issue 20 item 7: the task reference skipped the kind check)."""
    from tornado.httpclient import HTTPClientError

    from jupyter_tiers.app import actions
    from jupyter_tiers.app.actions import WrongKind

    job = local.submit(local.make_spec("import time\ntime.sleep(300)\n", name="arr", array="0-1"))
    task = f"{job.id}_1"
    await _until(lambda: jp_fetch(*API, "jobs", "laptop", task), lambda d: d["state"] == "RUNNING",
                 "task 1 to run")
    for parts, kwargs in (((), {"method": "DELETE"}),
                          (("scale",), {"method": "POST", "body": b'{"replicas": 2}'}),
                          (("restart",), {"method": "POST", "body": b""})):
        with pytest.raises(HTTPClientError) as err:
            await jp_fetch(*API, "jobs", "laptop", task, *parts, **kwargs)
        assert err.value.code == 409, parts
        assert err.value.response is not None
        assert body(err.value.response)["error"] == f"laptop/{task} is a job, not a service; use cancel"
    for verb in (actions.delete, actions.restart, lambda ref: actions.scale(ref, 1)):
        with pytest.raises(WrongKind):
            verb(task)
    # The same for `jupyter tiers` / %tiers (a task has no record of its own to name its kind).
    from jupyter_tiers.faces import tiers_command

    for argv in (["delete", task], ["scale", task, "2"], ["restart", task]):
        with pytest.raises(tiers_command.CommandUsage) as usage:
            tiers_command.run(argv)
        assert str(usage.value) == f"%tiers: {task} is a job, not a service; use %tiers cancel {task}"
    assert body(await jp_fetch(*API, "jobs", "laptop", task))["state"] == "RUNNING", "the task was left alone"
