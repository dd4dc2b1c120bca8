"""A local job's whole log streams (issue 9): Job.iter_logs and `%tiers logs ID` read it
LOG_CHUNK bytes at a time instead of all at once, so printing or scanning a log of any size holds
a bounded amount in memory. Checked on a real local job's 12 MB log by the size of each piece,
of each write to stdout and by tracemalloc's peak, never by time; multi-byte characters cut by
the chunk boundaries come out whole, and an offset starts the stream there. ``--tail N`` reads
the log backwards (read_last_lines, fuzzed against ``tail -n``) instead of loading all of it."""

from __future__ import annotations

import contextlib
import io
import random
import subprocess
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_tiers import api
from jupyter_tiers.batch.jobdir import LOG_NAME
from jupyter_tiers.faces import tiers_command
from jupyter_tiers.local.jobread import read_last_lines
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


def test_tail_reads_only_the_end(job: api.Job) -> None:
    raw = (Path(job.record.jobdir) / LOG_NAME).read_bytes()
    tracemalloc.start()
    try:
        text = job.logs(tail=3)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert text == b"".join(raw.splitlines(keepends=True)[-3:]).decode("utf-8")
    assert peak < LOG_CHUNK, f"--tail 3 held {peak} bytes of a {len(raw)}-byte log"
    out = _Writes()
    with contextlib.redirect_stdout(out):
        tiers_command.run(["logs", job.id, "--tail", "2"])
    assert out.getvalue().splitlines() == text.splitlines()[-2:]
    assert job.logs(tail=0) == ""


def _tail_n(data: bytes, n: int) -> bytes:
    """tail -n, in Python: lines end at a newline, a last line without one counts."""
    parts = data.split(b"\n")
    lines = [p + b"\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    return b"".join(lines[-n:]) if n else b""


def test_read_last_lines_matches_tail_n_on_any_block_size(tmp_path: Path) -> None:
    rng = random.Random(20261202)
    pieces = [b"a", b"loss=1", "✓".encode(), b"\r", b"\n", b"\n", b"", b"x" * 50]
    path = tmp_path / "log"
    for i in range(1500):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 40)))
        n = rng.randint(1, 12)
        path.write_bytes(data)
        with open(path, "rb") as f:
            got = read_last_lines(f, n, block=rng.choice([1, 2, 3, 7, 64, 1 << 16]))
        assert got == _tail_n(data, n), (data, n)
        if i % 100 == 0:  # and against the real tail now and then
            real = subprocess.run(["tail", "-n", str(n), str(path)], capture_output=True, check=True)
            assert got == real.stdout, (data, n)
