"""Issue 29 item 6 through the real server and the real Slurm cluster: the notebook's JobView of a
job that fails (rank 3 raises a ValueError, fail-stop stops the rest) and what the lab panel gets
for it (``GET jobs/box/ID``'s ``view``, with the ``logs/stream?view=1`` messages over it, as
detail.ts applies them) hold the same state, field by field, and the same log pane."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import textwrap
from typing import Any

import pytest

from jupyter_tiers.app.viewstate import schema
from jupyter_tiers.core.errors import SpecError
from jupyter_tiers.core.model import JobState
from jupyter_tiers.faces.server import params
from jupyter_tiers.faces.widgets.job_view import JobView
from jupyter_tiers.slurm.tier import SlurmTier
from tests.cluster.conftest import RANKS_UP
from tests.helpers import SentRecorder
from tests.server.test_slurm_api import API, box  # noqa: F401 (a fixture)
from tests.server.util import GUARD, body, until
from tests.unit.test_job_stream import SESSION, pane

BODY = RANKS_UP + textwrap.dedent("""\
    import os, time
    rank = int(os.environ["RANK"])
    for step in range(1, 16):
        print(f"step {step} loss={2.0 / step + rank:.4f}", flush=True)
    all_up()
    if rank == 3:
        raise ValueError("bad batch at step 16")
    time.sleep(120)
    """)


class RecordingView(SentRecorder, JobView):
    pass


def test_view_is_a_whole_jobs_stream() -> None:
    with pytest.raises(SpecError, match="leave out rank and pod"):
        params.log_query({"view": [b"1"], "rank": [b"0"]}, with_limit=False)
    assert params.log_query({"view": [b"1"]}, with_limit=False).view is True
    assert params.log_query({"view": [b"1"]}).view is False  # a range is rows, always


@pytest.mark.cluster
async def test_the_lab_panel_gets_the_notebooks_job_view(jp_fetch: Any, jp_ws_fetch: Any,
                                                         box: SlurmTier) -> None:  # noqa: F811
    job = box.submit(box.make_spec(BODY, name="sameview-api", nodes=2, ntasks_per_node=2))
    view = RecordingView(job)
    try:
        final = await asyncio.get_running_loop().run_in_executor(None, view.wait, 300)
        assert final is not None and final.state is JobState.FAILED, final
        assert "ValueError: bad batch at step 16" in view.summary, view.summary

        async def details() -> Any:
            return body(await jp_fetch(*API, "jobs", "box", job.id))

        done = await until(details, lambda d: d["terminal"], "the job to end")
        state = schema.defaults(schema.JobViewState)
        state.update(done["view"])
        ws = await jp_ws_fetch(*API, "jobs", "box", job.id, "logs", "stream", params={"view": "1"})
        lines: list[dict[str, Any]] = []
        while True:
            message = await asyncio.wait_for(ws.read_message(), GUARD)
            assert message is not None, "stream closed before eof"
            msg = json.loads(message)
            if "view" in msg:
                state.update(schema.checked(schema.JobViewState, msg["view"]))
            elif msg.get("kind") == "lines":
                lines.append(msg)
            if msg.get("eof"):
                break
        # After eof the socket stays open for the charts' rank picks: rank 2's series come.
        ws.write_message(json.dumps({"kind": "metrics_rank", "rank": 2}))
        while True:
            msg = json.loads(await asyncio.wait_for(ws.read_message(), GUARD))
            if msg.get("view", {}).get("metrics_rank") == 2:
                assert len(msg["view"]["metrics"]["loss"]) == 15
                break
        ws.close()

        for f in dataclasses.fields(schema.JobViewState):
            if f.name in SESSION or f.name in ("elapsed", "elapsed_s"):  # a live tick vs sacct's
                continue
            assert state[f.name] == getattr(view, f.name), (f.name, state[f.name], getattr(view, f.name))
        assert pane(lines) == pane(view.sent)
        assert state["fold_label"].startswith("3 ranks stopped by fail-stop after rank 3")
        assert any(r[3] for r in pane(lines)), "no kill report folded"
    finally:
        view.close()
        job.cancel()
