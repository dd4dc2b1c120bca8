"""The log-follow command (slurm/commands.py FOLLOW_SH and its perl relay) run for real with bash:
bytes arrive exactly from the offset, a fast log is coalesced, and it ends when its reader goes."""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from jupyter_tiers.slurm.commands import follow_argv

HANG_GUARD = 30  # seconds; only keeps a broken command from hanging the test run

pytestmark = pytest.mark.skipif(
    not (shutil.which("bash") and shutil.which("tail")), reason="needs bash and GNU tail"
)


def _no_perl_path(tmp_path: Path) -> str:
    """A PATH with bash, tail and cat but no perl: the fallback without the relay."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("bash", "tail", "cat"):
        (bindir / tool).symlink_to(shutil.which(tool))  # type: ignore[arg-type]
    return str(bindir)


def _start(jobdir: Path, offset: int, path_env: str | None = None) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    if path_env is not None:
        env["PATH"] = path_env
    return subprocess.Popen(
        follow_argv(str(jobdir), offset), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )


def _read_until(proc: subprocess.Popen[bytes], size: int) -> tuple[bytes, int]:
    """Read stdout until ``size`` bytes came; returns them and how many reads it took."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    got = b""
    reads = 0
    deadline = time.monotonic() + HANG_GUARD
    while len(got) < size:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"only {len(got)} of {size} bytes arrived"
        data = os.read(fd, 1 << 20)
        assert data, f"the stream ended after {len(got)} of {size} bytes"
        got += data
        reads += 1
    return got, reads


def _ends_when_reader_goes(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdout is not None and proc.stdin is not None
    proc.stdin.close()  # like the transport: the channel's stdin is shut at once
    proc.stdout.close()
    proc.wait(HANG_GUARD)


@pytest.mark.parametrize("perl", [True, False], ids=["perl relay", "plain tail"])
def test_follow_relays_bytes_exactly_from_the_offset(tmp_path: Path, perl: bool) -> None:
    if perl and not shutil.which("perl"):
        pytest.skip("no perl")
    log = tmp_path / "job.log"
    first = "0: héllo\n1: wörld\n".encode()
    log.write_bytes(first + b"0: part")
    proc = _start(tmp_path, len(first), None if perl else _no_perl_path(tmp_path))
    try:
        got, _ = _read_until(proc, len(b"0: part"))
        more = b"ial \xff line\n" + bytes(range(256)) + b"\n"
        with open(log, "ab") as f:
            f.write(more)
        rest, _ = _read_until(proc, len(more))
        assert got + rest == b"0: part" + more
    finally:
        _ends_when_reader_goes(proc)


def test_fast_log_is_coalesced_and_a_lone_line_is_not_held(tmp_path: Path) -> None:
    if not shutil.which("perl"):
        pytest.skip("no perl")
    log = tmp_path / "job.log"
    log.write_bytes(b"")
    proc = _start(tmp_path, 0)
    try:
        time.sleep(0.3)  # tail is following
        fd = os.open(log, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, b"0: lone\n")
            # Nothing else is written: if the relay held a lone line for company, this read
            # would hang until the guard instead of returning.
            got, _ = _read_until(proc, 8)
            assert got == b"0: lone\n"
            lines = [f"{i % 4}: line {i}\n".encode() for i in range(2000)]
            result: list[tuple[bytes, int]] = []
            reader = threading.Thread(
                target=lambda: result.append(_read_until(proc, sum(map(len, lines))))
            )
            start = time.monotonic()
            reader.start()
            for line in lines:  # one write per line, a few thousand a second
                os.write(fd, line)
                time.sleep(0.0001)
            reader.join(HANG_GUARD)
            elapsed = time.monotonic() - start
            got, reads = result[0]
        finally:
            os.close(fd)
        assert got == b"".join(lines)
        # At most one small write per 2 ms (plus slack for a loaded machine), not one per line.
        assert reads <= elapsed / 0.002 + 50, (reads, elapsed)
    finally:
        _ends_when_reader_goes(proc)


@pytest.mark.parametrize("perl", [True, False], ids=["perl relay", "plain tail"])
def test_follow_ends_when_its_reader_goes_even_if_the_log_is_idle(tmp_path: Path, perl: bool) -> None:
    if perl and not shutil.which("perl"):
        pytest.skip("no perl")
    (tmp_path / "job.log").write_bytes(b"0: only line\n")
    proc = _start(tmp_path, 0, None if perl else _no_perl_path(tmp_path))
    _read_until(proc, 13)
    _ends_when_reader_goes(proc)  # raises TimeoutExpired if it lingers
    # and no tail is left behind following the idle log
    time.sleep(1.5)
    left = subprocess.run(
        ["ps", "-eo", "args"], capture_output=True, text=True, check=True
    ).stdout
    assert str(tmp_path / "job.log") not in left
