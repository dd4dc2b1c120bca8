"""The files of a local job's directory and its state record, ``state.json``.

File names, reading ``state.json`` tolerantly (a value of the wrong type is dropped), replacing
it atomically, finding the job's supervisor, and recording FAILED for a job whose supervisor
died without recording the end.

This module imports only the standard library and small pure modules, to start fast.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .processes import kill_job_processes

STATE_FILE = "state.json"
PLAN_FILE = "job.json"
BATCH_FILE = "job.sh"
PID_FILE = "supervisor.pid"
CANCEL_FILE = "cancel"
SUPERVISOR_LOG = "supervisor.log"
ENV_DUMP = ".batch-env.json"
TERMINAL_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"})

# The keys of state.json this package reads, with the types it needs; a value of another type
# (a corrupt or hand-edited file) is dropped so that one bad file cannot break every listing.
_STATE_TYPES: dict[str, type | tuple[type, ...]] = {
    "job_id": (str, int), "name": str, "state": str, "reason": str, "nodelist": str,
    "submitted_at": (int, float), "start_time": (int, float), "end_time": (int, float),
    "updated_at": (int, float), "exit_code": int, "exit_signal": int, "failed_rank": int,
    "world_size": int, "pid": int, "pid_start": int, "master_port": int, "nodes": list,
    "rank_pids": dict, "boot_id": str, "start_boot": (int, float), "end_boot": (int, float),
}
_MAX_PID = 1 << 22  # Linux's largest pid_max


def _state_value_ok(key: str, value: Any) -> bool:
    expected = _STATE_TYPES.get(key)
    if expected is None or value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, expected):
        return False
    if isinstance(value, float):
        return math.isfinite(value) and abs(value) < 1e12  # a time within the next 30,000 years
    if isinstance(value, int) and key in ("pid", "master_port", "exit_code", "exit_signal",
                                          "failed_rank", "world_size"):
        return -1 <= value <= _MAX_PID if key != "pid" else 1 <= value <= _MAX_PID
    if isinstance(value, int) and key in ("start_time", "end_time", "submitted_at", "updated_at"):
        return abs(value) < 10**12
    return True



def boot_id() -> str | None:
    """This boot of the machine (``/proc/sys/kernel/random/boot_id``), None where unknown: a
    CLOCK_BOOTTIME reading means something only within the boot it was taken in."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip() or None
    except OSError:
        return None


def boottime() -> float:
    """Seconds on CLOCK_BOOTTIME: shared by every process of the machine, never stepped by NTP
    or by hand (only the wall clock is), counting a suspend (CLOCK_MONOTONIC where missing)."""
    return time.clock_gettime(getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC))


def end_stamp(state: Mapping[str, Any]) -> dict[str, float]:
    """``end_time`` (wall clock, to show) and, when the job started in this boot, ``end_boot``
    (to measure): what to record when a job ends."""
    out = {"end_time": time.time()}
    if isinstance(state.get("start_boot"), (int, float)) and state.get("boot_id") == boot_id():
        out["end_boot"] = boottime()
    return out


def elapsed_s(state: Mapping[str, Any], *, now_wall: float, now_boot: float,
              boot: str | None) -> int | None:
    """How long the job has run (or ran), in whole seconds; None before it started (pure).

    Measured on CLOCK_BOOTTIME (``start_boot``/``end_boot``, recorded by the supervisor) so that
    the wall clock stepped mid-job (NTP, a hand-set clock, ±1 h) moves neither way; from the
    wall-clock ``start_time``/``end_time`` only for a record without them, or a still running
    job whose start was taken in another boot. Never negative."""
    start = state.get("start_time")
    if not isinstance(start, (int, float)):
        return None
    start_boot, end_boot = state.get("start_boot"), state.get("end_boot")
    if isinstance(start_boot, (int, float)):
        if isinstance(end_boot, (int, float)):
            return int(max(0.0, end_boot - start_boot))
        ended = isinstance(state.get("end_time"), (int, float))
        if not ended and boot is not None and state.get("boot_id") == boot:
            return int(max(0.0, now_boot - start_boot))
    end = state.get("end_time")
    return int(max(0.0, (end if isinstance(end, (int, float)) else now_wall) - start))


def read_state(jobdir: Path | str) -> dict[str, Any] | None:
    """The job's state.json, or None when it is missing or unreadable. Values of the wrong type
    (a corrupt file) are left out, so a reader never trips on them."""
    try:
        data = json.loads((Path(jobdir) / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    return {k: v for k, v in data.items() if isinstance(k, str) and _state_value_ok(k, v)}



def write_state(jobdir: Path | str, state: Mapping[str, Any]) -> None:
    """Replace state.json atomically (readers see the old or the new file, never a part)."""
    path = Path(jobdir) / STATE_FILE
    tmp = path.with_name(f".{STATE_FILE}.{os.getpid()}.tmp")
    data = json.dumps(dict(state), indent=1, sort_keys=True).encode("utf-8")
    try:
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600),
                       "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):  # a full disk: leave no empty temporary behind
            os.unlink(tmp)
        raise



def supervisor_pid(jobdir: Path | str, state: Mapping[str, Any] | None) -> tuple[int | None, int | None]:
    """(pid, start time) of the job's supervisor: from state.json, else from supervisor.pid."""
    if state and isinstance(state.get("pid"), int) and _state_value_ok("pid", state["pid"]):
        start = state.get("pid_start")
        return int(state["pid"]), start if isinstance(start, int) else None
    try:
        words = (Path(jobdir) / PID_FILE).read_text().split()
    except (OSError, ValueError):
        return None, None
    if not words or not words[0].isdigit() or len(words[0]) > 8:
        return None, None
    start = int(words[1]) if len(words) > 1 and words[1].isdigit() and len(words[1]) < 20 else None
    return int(words[0]), start



def recover_lost(jobdir: Path | str, state: Mapping[str, Any], pid: int | None) -> dict[str, Any]:
    """The supervisor died without recording the end: stop what is left, record FAILED."""
    kill_job_processes(jobdir)
    final = dict(state)
    final.update(
        state="FAILED",
        reason=(
            f"the local supervisor (pid {pid}) ended without recording the job's end; "
            f"see {Path(jobdir) / SUPERVISOR_LOG}"
        ),
        **end_stamp(state),
    )
    try:
        write_state(jobdir, final)
    except OSError as exc:
        # Not recorded (a full disk, typically what killed the supervisor): the same end is
        # derived again on every look, and the reason says why it could not be written.
        final["reason"] = (f"{final['reason']}; the end could not be recorded in "
                           f"{Path(jobdir) / STATE_FILE}: {exc.strerror or exc}")
    return final

