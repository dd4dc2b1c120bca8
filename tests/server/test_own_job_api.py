"""The server running inside a Slurm job (Open OnDemand's Jupyter app, batchspawner): the REST
listing (fresh and cached) and the events socket show that job as the notebook's own row under
the profile that runs Slurm here, and its cancel route refuses it with a 409 naming why. No
cluster needed: nothing reaches scancel (the refusal comes first; the SSH profile's job is not in
the registry, so it is a 404)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from tests.server.util import GUARD, body

API = ("jupyter-tiers", "api")
OWN = {"SLURM_JOB_ID": "4242", "SLURMD_NODENAME": "c17", "SLURM_JOB_NAME": "ood-jupyter"}


async def read_ws(ws: Any) -> Any:
    message = await asyncio.wait_for(ws.read_message(), GUARD)
    return None if message is None else json.loads(message)


@pytest.fixture
def inside_job(monkeypatch: pytest.MonkeyPatch, tiers_config: Any) -> None:
    for name, value in OWN.items():
        monkeypatch.setenv(name, value)
    tiers_config({"default_profile": "here", "profiles": {
        "here": {"tier": "slurm"}, "far": {"tier": "slurm", "host": "login.example.org"}}})


async def test_the_own_job_is_listed_marked_and_never_cancelled(jp_fetch: Any, jp_ws_fetch: Any,
                                                                inside_job: None) -> None:
    cached = body(await jp_fetch(*API, "jobs", params={"refresh": "0"}))
    own = cached["items"][0]
    assert own["key"] == "here/4242" and own["own"] is True and own["state"] == "RUNNING"
    assert own["where"] == "c17" and own["size"] == "this notebook" and "no Cancel" in own["own_note"]
    assert own["rev"] <= cached["rev"]
    for query in ({"profile": "far", "refresh": "0"}, {"kind": "service", "refresh": "0"},
                  {"profile": "far"}, {"kind": "service"}):
        listed = body(await jp_fetch(*API, "jobs", params=query))
        assert not [i for i in listed["items"] if i.get("own")], query
    events = await jp_ws_fetch(*API, "events")
    try:
        snapshot = await read_ws(events)
        assert snapshot["type"] == "snapshot" and snapshot["items"][0]["key"] == "here/4242"
        assert snapshot["items"][0]["own"] is True
        # The page's clock for ages is the server's (issue 41 §8): the snapshot says it.
        assert isinstance(snapshot["server_time"], float) and snapshot["server_time"] > 1.7e9
    finally:
        events.close()

    with pytest.raises(HTTPClientError) as err:
        await jp_fetch(*API, "jobs", "here", "4242", "cancel", method="POST", body=b"")
    assert err.value.code == 409 and err.value.response is not None
    message = body(err.value.response)["error"]
    assert "job 4242 is the Slurm job this notebook runs inside on node c17" in message
    assert "would stop this JupyterLab" in message
    # the same number on a cluster reached over SSH is another job: not refused (404: unknown here)
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch(*API, "jobs", "far", "4242", "cancel", method="POST", body=b"")
    assert err.value.code == 404


async def test_outside_a_job_there_is_no_own_row(jp_fetch: Any, tiers_config: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SLURM_JOB_ID", "SLURM_JOBID"):
        monkeypatch.delenv(name, raising=False)
    tiers_config({"profiles": {"here": {"tier": "slurm"}}})
    cached = body(await jp_fetch(*API, "jobs", params={"refresh": "0"}))
    assert not [i for i in cached["items"] if i.get("own")]
