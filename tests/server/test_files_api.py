"""Issue 16 §5 through the server API on the real local tier: ``GET jobs/P/ID/files`` lists
what the job left, ``GET jobs/P/ID/files/NAME`` streams one listed file as an attachment; bad
or unknown names are refused (400, 404); the routes need a login (test_auth.py covers every
route of handler_table)."""

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
import pathlib
pathlib.Path("out").mkdir()
pathlib.Path("out/loss.csv").write_text("step,loss\\n1,0.5\\n")
pathlib.Path("r\\u00e9sum\\u00e9 \\"1\\".txt").write_bytes(b"x" * 300000)
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


async def test_list_and_fetch_files(jp_fetch: Any, local: Any) -> None:
    job = local.submit(local.make_spec(BODY, name="leaves"))
    deadline = time.monotonic() + 90
    while job.status().state.value != "COMPLETED":
        assert time.monotonic() < deadline, job.logs()
        await asyncio.sleep(0.2)

    listing = body(await jp_fetch(*API, "jobs", "laptop", job.id, "files"))
    names = {f["name"]: f for f in listing["files"]}
    assert names["out/loss.csv"]["size"] == 16 and names["out/loss.csv"]["mtime"] > 0
    only_csv = body(await jp_fetch(*API, "jobs", "laptop", job.id, "files", params={"pattern": "*.csv"}))
    assert [f["name"] for f in only_csv["files"]] == ["out/loss.csv"]

    got = await jp_fetch(*API, "jobs", "laptop", job.id, "files", "out", "loss.csv")
    assert got.body == b"step,loss\n1,0.5\n"
    assert got.headers["Content-Type"] == "application/octet-stream"
    assert got.headers["Content-Disposition"].startswith('attachment; filename="loss.csv"')
    big = await jp_fetch(*API, "jobs", "laptop", job.id, "files", 'résumé "1".txt')
    assert big.body == b"x" * 300000
    assert big.headers["Content-Disposition"] == (
        "attachment; filename=\"r_sum_ _1_.txt\"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%221%22.txt")

    for parts, code in ((("nothing.txt",), 404), (("..", "etc", "passwd"), 400), (("a", "", "b"), 400)):
        with pytest.raises(HTTPClientError) as err:
            await jp_fetch(*API, "jobs", "laptop", job.id, "files", *parts)
        assert err.value.code in (code, 404), parts  # a URL with '..' may be normalised away
