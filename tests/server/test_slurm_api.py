"""The API against the real Slurm test cluster over the real sshd: list, details with the
widget's view state, log ranges, a log stream resumed from an offset, events, cancel."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers import api
from jupyter_tiers.batch.logs import LogDecoder
from jupyter_tiers.slurm.tier import SlurmTier
from tests.cluster.conftest import profile_yaml
from tests.server.util import GUARD, body, until

pytestmark = pytest.mark.cluster

API = ("jupyter-tiers", "api")

TALKER = textwrap.dedent("""\
    import os, time
    rank = int(os.environ["RANK"])
    for i in range(12):
        print(f"line {i} of rank {rank}", flush=True)
        time.sleep(0.25)
    """)


@pytest.fixture
def box(cluster_env: dict[str, str], tiers_config: Any) -> SlurmTier:
    """The ``box`` profile (the test cluster) as the only profile the server sees."""
    path: Path = tiers_config({"profiles": {}})
    path.write_text(profile_yaml(cluster_env))
    tier = api.connect("box")
    assert isinstance(tier, SlurmTier)
    return tier


async def read_ws(ws: Any) -> Any:
    message = await asyncio.wait_for(ws.read_message(), GUARD)
    return None if message is None else json.loads(message)


def full_log(tier: SlurmTier, rec: Any) -> list[list[Any]]:
    lines = LogDecoder(0).feed(tier.read_log(rec, 0))
    return [[ln.rank, ln.text] for ln in lines]


async def test_list_details_logs_and_a_resumed_stream(jp_fetch: Any, jp_ws_fetch: Any,
                                                      box: SlurmTier) -> None:
    job = box.submit(box.make_spec(TALKER, name="api-talker", nodes=2))
    key = f"box/{job.id}"

    listing = body(await jp_fetch(*API, "jobs"))
    assert listing["errors"] == []
    item = next(i for i in listing["items"] if i["key"] == key)
    assert item["kind"] == "job" and item["name"] == "api-talker" and item["tier"] == "slurm"
    assert item["size"] == "2 ranks on 2 nodes" and item["profile"] == "box" and item["id"] == job.id

    # A stream opened while the job runs: read a first batch, drop it, resume from its offset.
    ws = await jp_ws_fetch(*API, "jobs", "box", job.id, "logs", "stream")
    first = await read_ws(ws)
    assert first["lines"] and first["offset"] > 0
    ws.close()
    got = list(first["lines"])
    ws = await jp_ws_fetch(*API, "jobs", "box", job.id, "logs", "stream", params={"offset": first["offset"]})
    while True:
        message = await read_ws(ws)
        assert message is not None, "stream closed before eof"
        got.extend(message["lines"])
        if message.get("eof"):
            break
    assert await read_ws(ws) is None  # the server closes after eof

    async def details() -> Any:
        return body(await jp_fetch(*API, "jobs", "box", job.id))

    done = await until(details, lambda d: d["terminal"], "the job to end")
    assert done["state"] == "COMPLETED", done
    view = done["view"]
    assert view["world_size"] == 2 and [r[0] for r in view["ranks"]] == ["x", "x"]
    assert view["ranks_per_node"] == 1  # the rank grid's rows before the ranks start
    # The detail panel's re-read (?refresh=0): the same final state, from the hub or one refresh.
    cached = body(await jp_fetch(*API, "jobs", "box", job.id, params={"refresh": "0"}))
    assert cached["state"] == "COMPLETED" and cached["view"]["ranks"] == view["ranks"], cached
    assert view["state"] == "COMPLETED" and view["first_failure"] == -1 and view["job_id"] == job.id
    assert view["summary"].startswith(f"job {job.id} COMPLETED") and done["summary"] == view["summary"]

    expected = full_log(box, job.record)
    assert len(expected) == 24
    assert got == expected  # nothing lost or repeated across the reconnect

    # Ranges: three lines, then the rest from the returned offset; one rank's lines.
    head = body(await jp_fetch(*API, "jobs", "box", job.id, "logs", params={"limit": "3"}))
    assert head["lines"] == expected[:3] and head["eof"] is False
    rest = body(await jp_fetch(*API, "jobs", "box", job.id, "logs", params={"offset": str(head["offset"])}))
    assert rest["lines"] == expected[3:] and rest["eof"] is True
    rank1 = body(await jp_fetch(*API, "jobs", "box", job.id, "logs", params={"rank": "1"}))
    assert rank1["lines"] == [pair for pair in expected if pair[0] == 1] and len(rank1["lines"]) == 12
    # A stream asked for a backlog starts that far before the end, at the next line boundary.
    raw = box.read_log(job.record, 0)
    tail3 = b"".join(raw.splitlines(keepends=True)[-3:])
    ws = await jp_ws_fetch(*API, "jobs", "box", job.id, "logs", "stream", params={"backlog": len(tail3) + 5})
    streamed: list[list[Any]] = []
    while True:
        message = await read_ws(ws)
        assert message is not None, "stream closed before eof"
        streamed.extend(message["lines"])
        if message.get("eof"):
            break
    assert streamed == expected[-3:] and message["offset"] == len(raw)
    # The list now says COMPLETED too, from the cache as well as from a refresh.
    for refresh in ("0", "1"):
        listing = body(await jp_fetch(*API, "jobs", params={"refresh": refresh}))
        item = next(i for i in listing["items"] if i["key"] == key)
        assert item["state"] == "COMPLETED" and item["terminal"] is True, (refresh, item)


async def test_cancel_a_running_job_seen_on_the_events_socket(jp_fetch: Any, jp_ws_fetch: Any,
                                                              box: SlurmTier) -> None:
    job = box.submit(box.make_spec("import time\nprint('up', flush=True)\ntime.sleep(300)\n",
                                   name="api-cancel"))
    key = f"box/{job.id}"
    events = await jp_ws_fetch(*API, "events")
    snapshot = await read_ws(events)
    assert snapshot["type"] == "snapshot" and key in [i["key"] for i in snapshot["items"]]

    async def details() -> Any:
        return body(await jp_fetch(*API, "jobs", "box", job.id))

    await until(details, lambda d: d["state"] == "RUNNING", "the job to run")
    stats = body(await jp_fetch(*API, "stats"))
    assert stats["listeners"] >= 1 and key in stats["watched"]
    result = body(await jp_fetch(*API, "jobs", "box", job.id, "cancel", method="POST", body=b""))
    assert result["ok"] is True and job.id in result["message"]
    while True:  # the hub pushes the end (bounded by read_ws's guard)
        message = await read_ws(events)
        assert message is not None
        ended = [i for i in message.get("items", []) if i["key"] == key and i["terminal"]]
        if message["type"] == "update" and ended:
            break
    assert ended[0]["state"] == "CANCELLED" and ended[0]["summary"].startswith(f"job {job.id} CANCELLED")
    events.close()


BIG = textwrap.dedent("""\
    import sys
    for i in range(40000):
        sys.stdout.write(f"line {i:05d} " + "x" * 80 + "\\n")
    sys.stdout.flush()
    """)


async def test_log_ranges_of_a_large_log_read_only_what_they_return(
        jp_fetch: Any, box: SlurmTier, monkeypatch: pytest.MonkeyPatch) -> None:
    """A range of a log much bigger than its limit reads the log in chunks and stops: the bytes
    read stay far below the log's size, and ranges chained by their offsets give every line
    once, each ending exactly where the next begins."""
    job = box.submit(box.make_spec(BIG, name="api-big-log"))
    status = job.wait(GUARD)
    assert status.state.name == "COMPLETED", status
    raw = box.read_log(job.record, 0)
    expected = full_log(box, job.record)
    assert len(expected) == 40000 and len(raw) > 3_000_000

    read: list[int] = []
    real_chunks, real_read = SlurmTier.log_chunks, SlurmTier.read_log

    def counting_chunks(self: SlurmTier, record: Any, offset: int = 0) -> Any:
        for chunk in real_chunks(self, record, offset):
            read.append(len(chunk))
            yield chunk

    def counting_read(self: SlurmTier, record: Any, offset: int = 0) -> bytes:
        data = real_read(self, record, offset)
        read.append(len(data))
        return data

    monkeypatch.setattr(SlurmTier, "log_chunks", counting_chunks)
    monkeypatch.setattr(SlurmTier, "read_log", counting_read)
    got: list[list[Any]] = []
    offset, requests = 0, 0
    while True:
        read.clear()
        page = body(await jp_fetch(*API, "jobs", "box", job.id, "logs",
                                   params={"offset": str(offset), "limit": "1000"}))
        requests += 1
        assert sum(read) < 1_000_000, (offset, sum(read))  # ~92 kB of lines, never the 3.7 MB rest
        if not page["eof"]:
            assert len(page["lines"]) == 1000
            # The next offset is exactly the end of the last returned line.
            n = len(got) + 1000
            assert page["offset"] == len(b"".join(raw.splitlines(keepends=True)[:n])), offset
        got.extend(page["lines"])
        offset = page["offset"]
        if page["eof"]:
            break
    assert got == expected and offset == len(raw) and requests == 40
