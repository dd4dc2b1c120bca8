"""The machine's wall clock stepped +1 h, then -1 h, mid-job (issue 18, item 7): the local job's
elapsed time (status, widget, ``%tiers jobs``) stays sane — never negative, never an hour ahead
of what really passed — and the 30-minute ``--time`` limit does not fire on the +1 h step.

The clock is not stepped for real (a shared machine): the kernel process (tests/local/
clock_worker.py) and everything it starts (the job's supervisor, its ranks) run under Debian's
libfaketime, whose offset file this test rewrites (``FAKETIME_NO_CACHE``: read on every call).
As an NTP step does, only CLOCK_REALTIME moves (``FAKETIME_DONT_FAKE_MONOTONIC``): the monotonic
and boot-time clocks stay real. In that mode libfaketime 0.9.10 breaks CPython's time.sleep
(EINVAL: it shifts the monotonic deadline by the wall clock's epoch), so tests/local/
nanosleep_shim.c, compiled here, is loaded before it and sends those sleeps straight to the
kernel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import loud_skip, wait_for

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def preload(tmp_path: Path) -> str:
    """LD_PRELOAD for a wall clock this test steps: the sleep shim, then libfaketime."""
    if not LIBFAKETIME.exists():
        loud_skip("clock-step test", f"{LIBFAKETIME} missing (apt-get install faketime)")
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        loud_skip("clock-step test", "no C compiler for tests/local/nanosleep_shim.c (apt-get install gcc)")
    shim = tmp_path / "nanosleep_shim.so"
    built = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(shim),
                            str(Path(__file__).with_name("nanosleep_shim.c"))],
                           capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    return f"{shim}:{LIBFAKETIME}"


def test_wall_clock_stepped_both_ways_mid_job(tmp_path: Path, preload: str) -> None:
    offset = tmp_path / "faketime-offset"
    offset.write_text("+0\n")
    go = tmp_path / "go"
    env = {**os.environ, "LD_PRELOAD": preload, "FAKETIME_TIMESTAMP_FILE": str(offset),
           "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    began = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "tests.local.clock_worker", str(tmp_path), str(go)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # (real seconds since `began`, the real wall clock, the words) for every line read
    readings: list[tuple[float, float, list[str]]] = []
    lock = threading.Lock()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            with lock:
                readings.append((time.monotonic() - began, time.time(), line.split()))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def seen(pred: Callable[[float, list[str]], bool]) -> bool:
        with lock:
            return any(pred(wall, words) for _, wall, words in readings)

    def done(_: float, w: list[str]) -> bool:
        return w[0] in ("END", "ERROR")

    try:
        wait_for(lambda: seen(lambda _, w: w[:2] == ["S", "RUNNING"] and w[2] != "None" and int(w[2]) >= 1)
                 or seen(done), "the job running for a second", timeout=120)
        for step, sign in (("+1h", 1), ("-1h", -1)):
            offset.write_text(step + "\n")
            def stepped(wall: float, w: list[str], sign: int = sign) -> bool:
                return w[0] == "S" and sign * (float(w[4]) - wall) > 3000

            wait_for(lambda stepped=stepped: seen(stepped) or seen(done),
                     f"the worker's clock stepped {step}", timeout=120)
            with lock:
                count = len(readings)
            wait_for(lambda count=count: len(readings) >= count + 10 or seen(done),
                     "10 more readings after the step", timeout=120)
        go.touch()
        wait_for(lambda: seen(done), "the job's end", timeout=120)
        proc.wait(timeout=60)
    finally:
        go.touch()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=10)
    assert proc.stderr is not None
    with lock:
        got = list(readings)
    errors = [" ".join(w) for _, _, w in got if w and w[0] == "ERROR"]
    assert not errors, (errors, proc.stderr.read()[-2000:])
    end = next(w for _, _, w in got if w and w[0] == "END")
    assert end[1] == "COMPLETED", end  # the +1 h step was not 30 minutes of running
    status_rows = [(t, wall, w) for t, wall, w in got if w and w[0] == "S" and w[2] != "None"]
    offsets = {round((float(w[4]) - wall) / 3600) for _, wall, w in status_rows}
    assert offsets == {0, 1, -1}, f"the job was not watched at +0, +1 h and -1 h: {offsets}"
    last = -1
    for real, _, words in status_rows:
        shown, row = int(words[2]), int(words[3])
        assert shown == row or abs(shown - row) <= 1, words  # the %tiers jobs row says the same
        assert 0 <= shown <= real + 1, (real, words)  # never negative, never ahead of real time
        assert shown >= last, (last, words)  # never backwards
        last = shown
    assert 0 <= int(end[2]) <= got[-1][0] + 1, end
