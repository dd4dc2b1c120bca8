"""A sweep on the real Slurm test cluster through the API: the array's details carry the task
table (a row per task with its parameters, state, metric and failure), and one task is cancelled
as ``jobs/box/{ID_i}/cancel`` while the array's other tasks are left alone."""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_tiers.slurm.tier import SlurmTier
from tests.server.test_slurm_api import API, box, until  # noqa: F401 (box: a fixture)
from tests.server.util import body

pytestmark = pytest.mark.cluster

BODY = """\
import time
print(f"loss={params['lr'] / 10}", flush=True)
if params["lr"] == 2:
    raise ValueError("lr 2 diverged")
if params["lr"] >= 3:
    time.sleep(300)
"""


async def test_slurm_array_details_rows_and_one_task_cancelled(jp_fetch: Any, box: SlurmTier) -> None:  # noqa: F811
    job = box.submit(box.make_spec(BODY, name="api-sweep", sweep="lr=1,2,3,4"))
    try:
        async def details() -> Any:
            return body(await jp_fetch(*API, "jobs", "box", job.id))

        def states(d: Any) -> list[str]:
            return [row[2] for row in d["view"]["tasks"]]

        # Task 3 may wait for a node while other tests use the shared cluster.
        first = await until(details, lambda d: states(d)[:3] == ["COMPLETED", "FAILED", "RUNNING"]
                            and states(d)[3] in ("PENDING", "RUNNING"), "tasks 0 and 1 to end, 2 to run")
        view = first["view"]
        assert first["view_kind"] == "array" and view["array_id"] == job.id and view["sweep"] is True
        assert [row[:2] for row in view["tasks"]] == [[0, "lr=1"], [1, "lr=2"], [2, "lr=3"], [3, "lr=4"]]
        assert view["counts"] in ("4 tasks: 2 RUNNING, 1 COMPLETED, 1 FAILED",
                                  "4 tasks: 1 RUNNING, 1 PENDING, 1 COMPLETED, 1 FAILED")
        assert view["tasks"][0][4] == "loss 0.1"
        assert "ValueError: lr 2 diverged" in view["tasks"][1][5]

        task = body(await jp_fetch(*API, "jobs", "box", f"{job.id}_2"))
        assert task["view_kind"] == "job" and task["view"]["job_id"] == f"{job.id}_2"
        result = body(await jp_fetch(*API, "jobs", "box", f"{job.id}_2", "cancel", method="POST", body=b""))
        assert result["ok"] is True
        after = await until(details, lambda d: states(d)[2] == "CANCELLED", "task 2 to be cancelled")
        assert states(after)[3] in ("PENDING", "RUNNING"), "cancelling one task left the others alone"
    finally:
        job.cancel()
