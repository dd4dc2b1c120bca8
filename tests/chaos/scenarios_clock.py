"""Local-tier scenario: the machine's wall clock stepped ±1 h mid-job (issue 18, item 7).

The clock is not stepped for real (a shared machine): a kernel process (tests/chaos/
clock_worker.py) and everything it starts (the job's supervisor, its ranks) run under Debian's
libfaketime, whose offset file the scenario rewrites (``FAKETIME_NO_CACHE``: read on every call).
As an NTP step does, only CLOCK_REALTIME moves (``FAKETIME_DONT_FAKE_MONOTONIC``): the monotonic
and boot-time clocks stay real. In that mode libfaketime 0.9.10 breaks CPython's time.sleep
(EINVAL: it shifts the monotonic deadline by the wall clock's epoch), so tests/chaos/
nanosleep_shim.c, compiled here, is loaded before it and sends those sleeps straight to the
kernel.

The job has a 30-minute ``--time`` limit and writes numbered lines until told to stop; the wall
clock is set to +1 h, back, -1 h, back... at seeded moments. Invariants: the elapsed time the
status shows (the widget's) and the ``%tiers jobs`` row's agree, are never negative, never ahead
of the real time passed, never go backwards; the job ends COMPLETED (the +1 h step is not an
hour of running); its log holds every line once, in order.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tests.chaos import schedules
from tests.chaos.harness import Outcome, check_sequence, wait_until

GUARD = 120.0
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
ROOT = Path(__file__).resolve().parent.parent.parent
OFFSETS = schedules.CLOCK_OFFSETS  # each a step of one hour from the one before


class ClockStepUnavailable(Exception):
    """libfaketime or a C compiler is missing: the scenario cannot run here."""


def preload(workdir: Path) -> str:
    """LD_PRELOAD for a wall clock the scenario steps: the sleep shim (built into ``workdir``),
    then libfaketime."""
    if not LIBFAKETIME.exists():
        raise ClockStepUnavailable(f"{LIBFAKETIME} missing (apt-get install faketime)")
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise ClockStepUnavailable("no C compiler for tests/chaos/nanosleep_shim.c (apt-get install gcc)")
    shim = workdir / "nanosleep_shim.so"
    built = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(shim),
                            str(Path(__file__).with_name("nanosleep_shim.c"))],
                           capture_output=True, text=True, timeout=120)
    if built.returncode != 0:
        raise ClockStepUnavailable(f"the sleep shim did not compile: {built.stderr.strip()[-500:]}")
    return f"{shim}:{LIBFAKETIME}"


def clock_steps(workdir: Path, *, seed: int, steps: int,
                progress: Callable[[str], None] | None = None) -> Outcome:
    """One job watched from a kernel whose wall clock is stepped ``steps`` times by an hour."""
    outcome = Outcome("local: wall clock stepped ±1 h mid-job")
    offset = workdir / "faketime-offset"
    offset.write_text("+0\n")
    go = workdir / "go"
    env = {**os.environ, "LD_PRELOAD": preload(workdir), "FAKETIME_TIMESTAMP_FILE": str(offset),
           "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    began = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "tests.chaos.clock_worker", str(workdir), str(go)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # (real seconds since `began`, the real wall clock, the words) of every line the kernel printed
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
            return any(pred(wall, words) for _, wall, words in readings if words)

    def done(_: float, w: list[str]) -> bool:
        return w[0] in ("END", "ERROR")

    try:
        if not wait_until(lambda: seen(lambda _, w: w[:2] == ["S", "RUNNING"] and w[2].isdigit()
                                       and int(w[2]) >= 1) or seen(done), GUARD, 0.1):
            outcome.wrong("the job never ran for a second")
        plan = schedules.local_clock_steps(seed, steps)
        for i, fault in enumerate(plan):
            if seen(done):  # it writes until told to: an end now is the kernel's error, said below
                for missed in plan[i:]:
                    outcome.undelivered_fault(f"{missed.target}: step to {missed.kind} after the job ended")
                break
            time.sleep(fault.at)
            step = fault.kind
            hours = int(step.rstrip("h")) if step != "+0" else 0
            offset.write_text(step + "\n")
            outcome.faults += 1

            def at_offset(wall: float, w: list[str], hours: int = hours) -> bool:
                return w[0] == "S" and round((float(w[4]) - wall) / 3600) == hours

            with lock:
                count = len(readings)
            if not wait_until(lambda count=count, at_offset=at_offset: (
                    seen(done) or (len(readings) >= count + 10 and any(
                        at_offset(wall, w) for _, wall, w in readings[count:] if w))), GUARD, 0.05):
                outcome.wrong(f"step {i}: the kernel never watched the job at {step}")
            if progress:
                progress(f"  clock step {i + 1}/{steps} (wall clock {step})")
        go.touch()
        if not wait_until(lambda: seen(done), GUARD, 0.1):
            outcome.wrong("the job never ended after it was told to")
        proc.wait(timeout=60)
    finally:
        go.touch()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=10)
    with lock:
        got = [(t, wall, w) for t, wall, w in readings if w]
    _check(outcome, got, proc.stderr.read() if proc.stderr else "")
    return outcome


def _check(outcome: Outcome, got: list[tuple[float, float, list[str]]], stderr: str) -> None:
    for _, _, w in got:
        if w[0] == "ERROR":
            outcome.wrong(f"the kernel said: {' '.join(w)} {stderr.strip()[-300:]}")
    end = next((w for _, _, w in got if w[0] == "END"), None)
    if end is None:
        outcome.wrong("no end was seen")
    elif end[1] != "COMPLETED":
        outcome.wrong(f"the job ended {' '.join(end[1:])} (a step of the wall clock is not time run)")
    last = -1
    for real, _, w in got:
        if w[0] != "S" or not w[2].isdigit():
            continue
        outcome.checked += 1
        shown, row = int(w[2]), int(w[3]) if w[3].isdigit() else -1
        if abs(shown - row) > 1:
            outcome.wrong(f"status elapsed {shown} s but the %tiers jobs row {w[3]}")
        if not 0 <= shown <= real + 1:
            outcome.wrong(f"elapsed {shown} s after {real:.1f} s of real time")
        # The end is recorded by the supervisor a moment after a last RUNNING reading may have
        # measured up to "now": one second of slack there, none while it runs.
        if shown < last - (1 if w[1] != "RUNNING" else 0):
            outcome.wrong(f"elapsed went back from {last} s to {shown} s")
        last = max(last, shown)
    numbers = next((w[1] for _, _, w in got if w[0] == "LOG" and len(w) > 1), "")
    seen = [int(n) for n in numbers.split(",") if n.isdigit()]
    result = check_sequence(seen, max(seen) + 1 if seen else 0)
    outcome.checked += len(seen)
    outcome.lost += result.lost
    outcome.duplicated += result.duplicated
    if not seen or result.out_of_order:
        outcome.wrong(f"the job's log: {len(seen)} numbered lines, {result.out_of_order} out of order")
