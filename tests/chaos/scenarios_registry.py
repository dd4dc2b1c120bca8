"""Registry scenarios: several real processes (two kernels adding and removing records, the
server listing them) on one registry file while some are stopped or killed; then the file
damaged on disk and read by ``jupyter tiers jobs``.

Invariants: every record the workers' operations leave is there exactly once and nothing else;
no error (least of all "database is locked") reaches a worker; a damaged file gives one clear
line naming it, no traceback, and is left byte for byte as it was.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from jupyter_tiers.config.registry import MAX_LIST, JobRecord, Registry
from tests.chaos import schedules
from tests.chaos.faults import damage_file, kill
from tests.chaos.harness import Outcome, wait_until
from tests.chaos.registry_worker import ops

ROOT = Path(__file__).resolve().parents[2]
GUARD = 300.0


def _env(registry: Path) -> dict[str, str]:
    env = dict(os.environ, JUPYTER_TIERS_REGISTRY=str(registry))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


class _Worker:
    def __init__(self, name: str, jobs: int, services: int, workdir: Path, env: dict[str, str],
                 journal: Path | None = None, release: Path | None = None) -> None:
        self.name, self.jobs, self.services = name, jobs, services
        self.journal = journal or workdir / f"{name}.journal"
        self.release = release
        self.stderr = workdir / f"{name}.stderr"
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        hold = [str(self.release)] if self.release is not None else []
        with open(self.stderr, "ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.chaos.registry_worker", self.name, str(self.jobs),
                 str(self.services), str(self.journal), *hold],
                cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL, stderr=err)

    def done(self) -> int:
        try:
            return len(self.journal.read_text().splitlines())
        except FileNotFoundError:
            return 0

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def concurrent(workdir: Path, *, seed: int, jobs: int, services: int, faults: int,
               writers: int = 2, progress: Callable[[str], None] | None = None) -> Outcome:
    """``writers`` kernels add/remove ``jobs`` + ``services`` records in all while the server
    lists; ``faults`` times one kernel is SIGSTOPped a moment or SIGKILLed and started again,
    once it has done the seeded number of operations (schedules.registry_concurrent). Each
    kernel's faults are delivered in a thread of their own (a fault held on one kernel does not
    hold back another's), and each kernel waits before its last operation until its faults are
    delivered: a fault never finds its kernel ended."""
    outcome = Outcome("registry: kernels + server, concurrent")
    registry = workdir / "registry.sqlite"
    env = _env(registry)
    Registry(registry)  # created once, as the first kernel would
    stop = workdir / "lister.stop"
    lister = _Worker("lister", 0, 0, workdir, env, journal=stop)  # lists until ``stop`` exists
    kernels = {f"k{i}": _Worker(f"k{i}", jobs // writers, services // writers, workdir, env,
                                release=workdir / f"k{i}.release") for i in range(writers)}
    total = len(ops("k", jobs // writers, services // writers))
    plan = schedules.registry_concurrent(seed, jobs, services, faults, writers)
    lock = threading.Lock()

    def deliver(target: _Worker, fault: schedules.Fault) -> None:
        threshold = int(fault.at)
        wait_until(lambda: target.done() >= threshold or not target.running, GUARD, 0.002)
        if not target.running:  # it cannot end before its release: it failed (its stderr says why)
            with lock:
                outcome.undelivered_fault(f"kernel {target.name} ended before its {fault.kind} at "
                                          f"operation {threshold}")
            return
        before = target.done()
        assert target.proc is not None
        if fault.kind == "SIGSTOP":
            kill(target.proc.pid, signal.SIGSTOP)
            time.sleep(fault.hold)  # holding the write lock, maybe
            kill(target.proc.pid, signal.SIGCONT)
        else:
            kill(target.proc.pid, signal.SIGKILL)
            target.proc.wait()
            target.start()  # the kernel restarted: it resumes from its journal
        since = time.monotonic()
        with lock:
            outcome.faults += 1
            count = outcome.faults
        # Its next operation finished (or it reached its last one, where it waits for release).
        if wait_until(lambda: target.done() > before or target.done() >= total - 1 or not target.running,
                      GUARD) and target.done() > before:
            with lock:
                outcome.recover_s.append(time.monotonic() - since)
        if progress:
            progress(f"  registry fault {count}/{faults} ({fault.kind} {target.name} at operation "
                     f"{threshold})")

    def deliver_all(target: _Worker) -> None:
        try:
            for fault in plan:
                if fault.target == target.name:
                    deliver(target, fault)
        finally:
            assert target.release is not None
            target.release.touch()

    threads = [threading.Thread(target=deliver_all, args=(k,), name=f"chaos-registry-{k.name}", daemon=True)
               for k in kernels.values()]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(GUARD * (faults + 1))
        for k in kernels.values():
            assert k.proc is not None
            try:
                k.proc.wait(timeout=GUARD)
            except subprocess.TimeoutExpired:
                outcome.wrong(f"kernel {k.name} did not finish its {jobs // writers} jobs")
    finally:
        stop.touch()
        for k in kernels.values():
            assert k.release is not None
            k.release.touch()
        for w in [*kernels.values(), lister]:
            if w.proc is not None:
                try:
                    w.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    w.proc.kill()
                    w.proc.wait()
    expected: set[str] = set()
    for k in kernels.values():
        for verb, job_id, _kind in ops(k.name, k.jobs, k.services):
            (expected.add if verb == "add" else expected.discard)(job_id)
        if k.done() != len(ops(k.name, k.jobs, k.services)):
            outcome.wrong(f"kernel {k.name} journal has {k.done()} operations")
    listed = [r.job_id for r in Registry(registry).list(limit=MAX_LIST)]
    outcome.checked = len(expected)
    outcome.lost = len(expected - set(listed))
    outcome.duplicated = len(listed) - len(set(listed))
    for extra in sorted(set(listed) - expected):
        outcome.wrong(f"record {extra} should have been removed")
    for w in [*kernels.values(), lister]:
        for line in w.stderr.read_text(errors="replace").splitlines():
            outcome.problems.append(f"{w.name}: {line}")
    return outcome


def damaged(workdir: Path, *, seed: int, records: int = 300,
            progress: Callable[[str], None] | None = None) -> Outcome:
    """A registry of ``records`` records damaged each way of schedules.DAMAGES (at seeded places),
    then listed by ``jupyter tiers jobs``."""
    outcome = Outcome("registry: file truncated/corrupted")
    rng = random.Random(f"{seed}/registry-damage-bytes")
    good = workdir / "good.sqlite"
    reg = Registry(good)
    for i in range(records):
        reg.add(JobRecord(profile="chaos", tier="local", job_id=str(i), name=f"n{i}", script="x" * 500))
    size = good.stat().st_size
    page = 4096
    pages = size // page
    for fault in schedules.registry_damages(seed):
        how = fault.kind
        path = workdir / f"{how.replace(' ', '-')}.sqlite"
        shutil.copyfile(good, path)
        if how == "truncated":  # somewhere past the first page, before the last
            damage_file(path, page + int(fault.at * (size - 2 * page)), truncate=True)
        elif how == "header overwritten":
            damage_file(path, 0, b"this is not sqlite")
        else:  # one whole page, never the first (the header)
            damage_file(path, page * (1 + int(fault.at * (pages - 1))), rng.randbytes(page))
        before = hashlib.sha256(path.read_bytes()).hexdigest()
        run = subprocess.run([sys.executable, "-m", "jupyter_tiers.faces.cli", "jobs"], cwd=workdir,
                             env=_env(path), capture_output=True, text=True, timeout=120)
        outcome.faults += 1
        outcome.checked += 1
        lines = [ln for ln in (run.stdout + run.stderr).splitlines() if ln.strip()]
        if "Traceback" in run.stdout + run.stderr:
            outcome.wrong(f"{how}: a traceback reached the user: {lines[-1:]}")
        elif len(lines) != 1 or str(path) not in lines[0] or "damaged" not in lines[0]:
            outcome.wrong(f"{how}: not one clear line naming the file: {lines[:3]}")
        if hashlib.sha256(path.read_bytes()).hexdigest() != before:
            outcome.wrong(f"{how}: the damaged file was changed")
        if progress:
            progress(f"  registry damage: {how}")
    return outcome
