"""Issue 37 through the server API on the real local tier: ``POST jobs/P/ID/stacks`` answers a
running job's stacks grouped (what the sidebar's Stacks button shows); an unknown job is a 404.
The route needs a login like every other (test_auth.py covers handler_table)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_tiers import api
from tests.server.util import body

API = ("jupyter-tiers", "api")

BODY = """\
import os, time
rank = int(os.environ["RANK"])
def waits_here():
    open(os.path.join(os.environ["JT_JOB_DIR"], f"up-{rank}"), "w").close()
    time.sleep(3600)
waits_here()
"""


@pytest.fixture
def local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiers_config: Any) -> Any:
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    tiers_config({"profiles": {"laptop": {"tier": "local"}}})
    tier = api.connect("laptop")
    try:
        yield tier
    finally:
        api.close_all()


async def test_stacks_of_a_running_job(jp_fetch: Any, local: Any) -> None:
    job = local.submit(local.make_spec(BODY, name="waits", ntasks_per_node=2))
    try:
        here = Path(job.record.jobdir)
        deadline = time.monotonic() + 120
        while not all((here / f"up-{r}").exists() for r in (0, 1)):
            assert time.monotonic() < deadline, job.logs()  # a bound against hanging
            await asyncio.sleep(0.2)
        answer = body(await jp_fetch(*API, "jobs", "laptop", job.id, "stacks", method="POST", body=b""))
        assert [g["ranks"] for g in answer["groups"]] == [[0, 1]], answer["text"]
        (thread,) = answer["groups"][0]["threads"]
        assert thread["frames"][-1].startswith("cell line 6, in waits_here:  time.sleep(3600)")
        assert answer["groups"][0]["title"] == "ranks 0-1 (2) on local0" and answer["missing"] == []
        assert "ranks 0-1 (2) on local0\n" in answer["text"]
    finally:
        job.cancel()
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch(*API, "jobs", "laptop", "no-such-job", "stacks", method="POST", body=b"")
    assert err.value.code == 404
