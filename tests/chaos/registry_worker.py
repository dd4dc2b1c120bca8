"""One process writing the shared registry, as a kernel does: ``python -m tests.chaos.registry_worker
ID JOBS SERVICES JOURNAL [RELEASE]`` adds JOBS job records and SERVICES service records, removes
every fourth one's predecessor, lists after every fifth, and appends each finished operation to
JOURNAL (so a worker killed and started again resumes where it stopped, and the harness knows what
was done). With RELEASE it waits before its last operation until that file exists (at most
HOLD_S): the harness releases it once its faults are delivered, so no fault finds it ended.
``ID`` ``lister``: only list, over and over, until JOURNAL exists (the server's sidebar).

Any error is one line on stderr, ``ERROR <text>``; the harness counts them.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from jupyter_tiers.config.registry import MAX_LIST, JobRecord, Registry

PACE_S = 0.005  # between operations: a kernel's pace
HOLD_S = 600.0  # the longest a worker waits for its release (a harness that died never releases)


def ops(worker: str, jobs: int, services: int) -> list[tuple[str, str, str]]:
    """The worker's operations in order: (verb, key's job id, kind)."""
    out: list[tuple[str, str, str]] = []
    for i in range(jobs + services):
        kind = "job" if i < jobs else "service"
        out.append(("add", f"{worker}-{i}", kind))
        if i % 4 == 3:
            out.append(("remove", f"{worker}-{i - 2}", kind))
    return out


def _done(journal: Path) -> int:
    try:
        return len(journal.read_text().splitlines())
    except FileNotFoundError:
        return 0


def main(argv: list[str]) -> int:
    worker, jobs, services, journal = argv[0], int(argv[1]), int(argv[2]), Path(argv[3])
    release = Path(argv[4]) if len(argv) > 4 else None
    if worker == "lister":
        while not journal.exists():
            try:
                Registry().list(limit=MAX_LIST)
            except Exception as exc:
                print(f"ERROR {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            time.sleep(0.01)
        return 0
    todo = ops(worker, jobs, services)
    start = _done(journal)
    with open(journal, "a") as out:
        for n, (verb, job_id, kind) in enumerate(todo[start:], start):
            if release is not None and n == len(todo) - 1:
                held = time.monotonic() + HOLD_S
                while not release.exists() and time.monotonic() < held:
                    time.sleep(0.01)
            while True:
                try:
                    reg = Registry()
                    if verb == "add":
                        reg.add(JobRecord(profile="chaos", tier="local", job_id=job_id, name=job_id,
                                          kind=kind, script="x" * 200))
                    else:
                        reg.remove(f"chaos/{job_id}")
                    if n % 5 == 4:
                        reg.list(limit=MAX_LIST)
                    break
                except Exception as exc:
                    print(f"ERROR {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                    time.sleep(0.1)
            out.write(f"{verb} {job_id}\n")
            out.flush()
            os.fsync(out.fileno())
            time.sleep(PACE_S)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
