"""A local job's elapsed time is measured on CLOCK_BOOTTIME (recorded by its supervisor), so the
wall clock stepped ±1 h mid-job (NTP, a hand-set clock) neither jumps it nor makes it negative."""

from __future__ import annotations

import random

from jupyter_tiers.local.jobstate import _STATE_TYPES, elapsed_s

BOOT = "0b3c5f7e-boot"
WALL = 1_796_000_000.0


def _running(**extra: object) -> dict[str, object]:
    return {"state": "RUNNING", "start_time": WALL, "start_boot": 1000.0, "boot_id": BOOT, **extra}


def test_a_step_of_the_wall_clock_moves_nothing() -> None:
    state = _running()
    for step in (0.0, 3600.0, -3600.0):
        assert elapsed_s(state, now_wall=WALL + 90 + step, now_boot=1090.0, boot=BOOT) == 90


def test_an_ended_job_keeps_what_it_ran() -> None:
    state = _running(state="COMPLETED", end_time=WALL - 3000, end_boot=1600.5)  # clock set back mid-job
    assert elapsed_s(state, now_wall=WALL + 9999, now_boot=99999.0, boot="another-boot") == 600


def test_records_without_boottime_fall_back_to_the_wall_clock_never_negative() -> None:
    old = {"state": "RUNNING", "start_time": WALL}
    assert elapsed_s(old, now_wall=WALL + 42.9, now_boot=5.0, boot=BOOT) == 42
    assert elapsed_s(old, now_wall=WALL - 3600, now_boot=5.0, boot=BOOT) == 0
    ended = {"state": "FAILED", "start_time": WALL, "end_time": WALL + 7, "start_boot": 1.0, "boot_id": BOOT}
    assert elapsed_s(ended, now_wall=WALL + 100, now_boot=500.0, boot=BOOT) == 7  # an end without end_boot
    # started in an earlier boot and never ended (the machine rebooted under it): the wall clock
    assert elapsed_s(_running(), now_wall=WALL + 60, now_boot=3.0, boot="after-reboot") == 60
    assert elapsed_s({"state": "PENDING"}, now_wall=WALL, now_boot=1.0, boot=BOOT) is None


def test_elapsed_fuzz() -> None:
    """Whatever the record holds (of the types read_state lets through), an int >= 0 or None."""
    rng = random.Random(7)
    numbers = [0, 1, -5, 1e11, -1e11, 3.5, WALL]
    for _ in range(3000):
        state = {k: rng.choice(numbers) for k in ("start_time", "end_time", "start_boot", "end_boot")
                 if rng.random() < 0.6}
        if rng.random() < 0.5:
            state["boot_id"] = rng.choice([BOOT, "x"])
        got = elapsed_s(state, now_wall=rng.choice(numbers), now_boot=rng.choice(numbers),
                        boot=rng.choice([BOOT, None]))
        assert got is None or (isinstance(got, int) and got >= 0)
    assert {"boot_id", "start_boot", "end_boot"} <= set(_STATE_TYPES)
