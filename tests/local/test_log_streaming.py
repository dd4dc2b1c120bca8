"""A local job's whole log streams (issue 9): Job.iter_logs and `%tiers logs ID` read it
LOG_CHUNK bytes at a time instead of all at once, so printing or scanning a log of any size holds
a bounded amount in memory. Checked on a real local job's 12 MB log by the size of each piece,
of each write to stdout and by tracemalloc's peak, never by time; multi-byte characters cut by
the chunk boundaries come out whole, and an offset starts the stream there."""

from __future__ import annotations

import contextlib
import io
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_tiers import api, tiers_command
from jupyter_tiers.jobdir import LOG_NAME
from jupyter_tiers.local.tier import LOG_CHUNK

BODY = """\
for i in range(12000):
    print(f"{i:05d} " + "✓" * 340)
"""


@pytest.fixture
def job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[api.Job]:
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(tmp_path / "tiers.yaml"))
    (tmp_path / "tiers.yaml").write_text("profiles: {}\n")
    tier = api.connect("local")
    try:
        job = tier.submit(tier.make_spec(BODY, name="biglog"))
        assert job.wait(timeout=180).state.value == "COMPLETED"
        yield job
    finally:
        api.close_all()


class _Writes(io.StringIO):
    """stdout that remembers its largest single write."""

    largest = 0

    def write(self, s: str) -> int:
        self.largest = max(self.largest, len(s))
        return super().write(s)


def test_iter_logs_and_the_logs_command_stream_a_big_log(job: api.Job) -> None:
    raw = (Path(job.record.jobdir) / LOG_NAME).read_bytes()
    assert len(raw) > 10 * LOG_CHUNK and raw.count(b"\n") == 12000
    whole = raw.decode("utf-8")

    pieces = 0
    tracemalloc.start()
    try:
        for piece in job.iter_logs():
            pieces += 1
            assert len(piece) <= LOG_CHUNK
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert pieces > 10
    assert peak < 6 * LOG_CHUNK, f"iter_logs held {peak} bytes of a {len(raw)}-byte log"
    assert "".join(job.iter_logs()) == whole  # chunk boundaries cut through ✓ (3 bytes)

    out = _Writes()
    with contextlib.redirect_stdout(out):
        tiers_command.run(["logs", job.id])
    assert out.getvalue() == whole
    assert out.largest <= LOG_CHUNK


def test_iter_logs_from_an_offset(job: api.Job) -> None:
    raw = (Path(job.record.jobdir) / LOG_NAME).read_bytes()
    start = raw.index(b"\n", 3 * LOG_CHUNK) + 1
    assert "".join(job.iter_logs(offset=start)) == raw[start:].decode("utf-8")
    assert "".join(job.iter_logs(offset=len(raw))) == ""
    assert list(job.tier.log_chunks(job.record, len(raw) + 10)) == []
