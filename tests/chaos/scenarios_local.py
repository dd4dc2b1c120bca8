"""Local-tier scenario: a job's supervisor SIGKILLed mid-job, then the job looked at again from a
new kernel (a fresh LocalTier on the same registry, as ``%tiers attach`` does).

Invariants: with nobody looking, no process of the job is left (its lifeline stopped them); the
reattached job says what happened (FAILED, the supervisor named); each rank's numbered lines up
to the kill are in its log once, in order. Recovery: from the kill to the job's last process gone.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.errors import TiersError
from jupyter_tiers.core.model import JobState
from jupyter_tiers.local.tier import LocalTier
from tests.chaos import schedules
from tests.chaos.faults import kill
from tests.chaos.harness import Outcome, check_sequence, wait_until
from tests.helpers import local_profile, processes_mentioning

GUARD = 120.0
FAST = {"status_interval": 0.5, "rank_interval": 0.2, "first_poll": 0.1}
WRITER = 'i=0; while true; do echo "n $i"; i=$((i+1)); sleep 0.02; done'
NUMBER = re.compile(r"\bn (\d+)$")
ROOT = Path(__file__).resolve().parent.parent.parent


def supervisor_kills(workdir: Path, *, seed: int, kills: int,
                     progress: Callable[[str], None] | None = None,
                     notes: list[str] | None = None) -> Outcome:
    """``kills`` jobs of 2 ranks, each one's supervisor SIGKILLed a seeded moment after start."""
    outcome = Outcome("local: supervisor SIGKILLed mid-job")
    profile = local_profile(workdir / "jobs")
    registry = Registry(workdir / "registry.sqlite")
    tier = LocalTier(profile, registry, watcher_options=FAST)
    ran_on = 0
    try:
        for i, fault in enumerate(schedules.local_supervisor_kills(seed, kills)):
            job = tier.submit(tier.make_spec(WRITER, shell=True, nodes=2, name=f"chaos-{i}"))
            jobdir = job.record.jobdir
            if not wait_until(lambda j=job: len(j.logs(rank=1).splitlines()) > 5, GUARD, 0.1):
                outcome.wrong(f"job {job.id} never logged from both ranks")
                continue
            time.sleep(fault.at)
            state = json.loads(Path(jobdir, "state.json").read_text())
            kill(int(state["pid"]), signal.SIGKILL)
            at = time.monotonic()
            outcome.faults += 1
            # Nobody looks (a closed notebook): the job's processes must stop by themselves.
            if wait_until(lambda d=jobdir: not processes_mentioning(d, skip_zombies=True) or None,
                          GUARD) is None:
                ran_on += 1
                outcome.wrong(f"job {job.id}: its processes ran on unwatched after the supervisor was "
                              f"killed: {processes_mentioning(jobdir, skip_zombies=True)}")
            unwatched_s = time.monotonic() - at
            fresh = LocalTier(profile, Registry(workdir / "registry.sqlite"), watcher_options=FAST)
            try:
                status = fresh.attach(job.id).status()
            finally:
                fresh.close()
            outcome.recover_s.append(unwatched_s)
            if status.state is not JobState.FAILED or "supervisor" not in (status.reason or ""):
                outcome.wrong(f"job {job.id} after its supervisor was killed: {status.state} "
                              f"({status.reason})")
            left = wait_until(lambda d=jobdir: not processes_mentioning(d, skip_zombies=True) or None,
                              GUARD) is None
            if left:
                outcome.wrong(f"job {job.id}: processes left after reattach: "
                              f"{processes_mentioning(jobdir, skip_zombies=True)}")
            for rank in (0, 1):
                seen = [int(m.group(1)) for m in map(NUMBER.search, job.logs(rank=rank).splitlines()) if m]
                result = check_sequence(seen, max(seen, default=-1) + 1)
                outcome.checked += len(seen)
                outcome.lost += result.lost
                outcome.duplicated += result.duplicated
                if result.out_of_order:
                    outcome.wrong(f"job {job.id} rank {rank}: lines out of order")
            if progress:
                progress(f"  supervisor kill {i + 1}/{kills}")
    finally:
        for rec in tier.registry.list(limit=100):
            tier.cancel(rec)
        tier.close()
    if notes is not None and ran_on:
        notes.append(f"local: after {ran_on} of {outcome.faults} supervisor kills the ranks ran on "
                     "unwatched")
    return outcome


def _kernel(workdir: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tests.chaos.kernel_worker", str(workdir), *args],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)


def kernel_kills(workdir: Path, *, seed: int, kills: int, lines: int = schedules.KERNEL_JOB_LINES,
                 progress: Callable[[str], None] | None = None) -> Outcome:
    """``kills`` times: a kernel process submits a 2-rank job (``lines`` numbered lines a rank,
    50 a second) and follows its log; it is SIGKILLed after a seeded number of lines; a new
    kernel process attaches and follows on from the last line the first one had. Invariants:
    the job runs on to COMPLETED; every rank's lines, the first kernel's then the second's,
    exactly once and in order, and equal to the log file. Recovery: from the kill to the new
    kernel's first line."""
    outcome = Outcome("local: kernel SIGKILLed mid-job, attached")
    for i, fault in enumerate(schedules.local_kernel_kills(seed, kills, lines)):
        jobdir_root = workdir / f"k{i}"
        jobdir_root.mkdir()
        first = _kernel(jobdir_root, "submit", str(lines))
        assert first.stdout is not None
        job_id, seen, offset = "", [], 0
        stop_after = int(fault.at)  # of 2 * lines: the job is still writing
        for raw in first.stdout:
            words = raw.rstrip("\n").split(" ", 3)
            if words[0] == "JOB":
                job_id = words[1]
            elif words[0] == "L":
                offset = int(words[1])
                seen.append((words[2], words[3]))
                if len(seen) >= stop_after:
                    break
            else:
                outcome.problems.append(f"first kernel said: {raw.strip()}")
                break
        kill(first.pid, signal.SIGKILL)
        at = time.monotonic()
        first.wait(GUARD)
        outcome.faults += 1
        second = _kernel(jobdir_root, "attach", job_id, str(offset))
        assert second.stdout is not None
        end = ""
        for raw in second.stdout:
            words = raw.rstrip("\n").split(" ", 3)
            if words[0] == "L":
                if len(outcome.recover_s) <= i:
                    outcome.recover_s.append(time.monotonic() - at)
                seen.append((words[2], words[3]))
            elif words[0] == "END":
                end = words[1]
            else:
                outcome.problems.append(f"new kernel said: {raw.strip()}")
        second.wait(GUARD)
        if end != JobState.COMPLETED.value:
            outcome.wrong(f"job {job_id} after the kernel was killed ended {end or 'unseen'}")
        tier = LocalTier(local_profile(jobdir_root / "jobs"),
                         Registry(jobdir_root / "registry.sqlite"), watcher_options=FAST)
        try:
            job = tier.job(tier.registry.get(job_id, profile=tier.name))
            for rank in (0, 1):
                followed = [int(m.group(1)) for r, text in seen if r == str(rank)
                            if (m := NUMBER.search(text))]
                in_file = [int(m.group(1)) for m in map(NUMBER.search, job.logs(rank=rank).splitlines())
                           if m]
                result = check_sequence(followed, lines)
                outcome.checked += len(followed)
                outcome.lost += result.lost
                outcome.duplicated += result.duplicated
                if result.out_of_order:
                    outcome.wrong(f"job {job_id} rank {rank}: lines out of order")
                if followed != in_file:
                    outcome.wrong(f"job {job_id} rank {rank}: followed lines differ from the log file")
        finally:
            tier.close()
        if progress:
            progress(f"  kernel kill {i + 1}/{kills} after {stop_after} lines")
    return outcome


def kernel_kills_mid_rollout(workdir: Path, *, seed: int, kills: int,
                             progress: Callable[[str], None] | None = None) -> Outcome:
    """``kills`` times: a kernel process rolls out a 2-replica local service (its replicas listen
    schedules.LOCAL_LISTEN_AFTER_S after they start) and is SIGKILLed a seeded moment in the first
    third of that after applying it; a new kernel process attaches.
    Invariants: the service comes READY for the new kernel with 2/2 replicas and answers;
    deleted from there, no process of it is left. Recovery: from the kill to READY seen."""
    outcome = Outcome("local: kernel SIGKILLed mid-rollout, attached")
    for i, fault in enumerate(schedules.local_rollout_kills(seed, kills)):
        delay = fault.at
        root = workdir / f"r{i}"
        root.mkdir()
        name = f"chaos-roll-{i}"
        first = _kernel(root, "serve", name, str(schedules.LOCAL_LISTEN_AFTER_S))
        assert first.stdout is not None
        said = first.stdout.readline().split()
        if said[:1] != ["SVC"]:
            outcome.problems.append(f"first kernel said: {' '.join(said)}")
        time.sleep(delay)
        kill(first.pid, signal.SIGKILL)
        at = time.monotonic()
        first.wait(GUARD)
        outcome.faults += 1
        second = _kernel(root, "attach-service", name)
        out, _ = second.communicate(timeout=GUARD)
        lines = out.splitlines()
        ready = next((line.split() for line in lines if line.startswith("READY ")), None)
        outcome.checked += 1
        if ready is None or ready[1:3] != ["READY", "2/2"] or len(ready) < 4:
            outcome.wrong(f"service {name} after the kernel was killed: {lines}")
        else:
            outcome.recover_s.append(time.monotonic() - at)
        if "DELETED" not in lines:
            outcome.problems.append(f"service {name} not deleted: {lines}")
        left = wait_until(lambda r=root: not processes_mentioning(r, skip_zombies=True) or None, GUARD)
        if left is None:
            outcome.wrong(f"service {name}: processes left after delete: "
                          f"{processes_mentioning(root, skip_zombies=True)}")
        if progress:
            progress(f"  kernel kill mid-rollout {i + 1}/{kills} ({delay:.2f} s after apply)")
    return outcome


def disk_full(disk: Path, registry_path: Path, progress: Callable[[str], None] | None = None
              ) -> Outcome:
    """The local tier's workdir on a small file system (``disk``: a tmpfs of a few MiB the
    caller mounted). A job logging as fast as it can fills it; then a submit finds it full.
    Invariants: the job ends FAILED, its reason one line naming the job directory and the full
    disk, no process of it left, no temporary state file left; the submit on the full disk is
    refused with one line naming the workdir and leaves no record."""
    outcome = Outcome("local: workdir disk full")
    tier = LocalTier(local_profile(disk / "jobs"), Registry(registry_path), watcher_options=FAST)
    try:
        job = tier.submit(tier.make_spec('i=0; while true; do echo "................................'
                                         '................ n $i"; i=$((i+1)); done',
                                         shell=True, name="chaos-disk"))
        outcome.faults += 1
        at = time.monotonic()
        status = job.wait(timeout=GUARD)
        outcome.recover_s.append(time.monotonic() - at)
        jobdir = job.record.jobdir
        reason = status.reason or ""
        outcome.checked += 1
        if status.state is not JobState.FAILED or jobdir not in reason or "No space left" not in reason:
            outcome.wrong(f"job {job.id} on a full disk: {status.state.value} ({reason})")
        if "\n" in reason or "Traceback" in reason:
            outcome.wrong(f"job {job.id}: its reason is not one line: {reason!r}")
        if wait_until(lambda: not processes_mentioning(jobdir, skip_zombies=True) or None, GUARD) is None:
            outcome.wrong(f"job {job.id}: processes left: {processes_mentioning(jobdir, skip_zombies=True)}")
        left = list(Path(jobdir).glob(".*.tmp"))
        if left:
            outcome.wrong(f"job {job.id}: temporary files left on the full disk: {left}")
        seen = [int(m.group(1)) for m in map(NUMBER.search, job.logs(rank=0).splitlines()) if m]
        result = check_sequence(seen, max(seen, default=-1) + 1)
        outcome.checked += len(seen)
        outcome.lost += result.lost
        outcome.duplicated += result.duplicated
        if progress:
            progress(f"  job on a full disk: {status.state.value} after {len(seen)} lines")
        outcome.faults += 1
        outcome.checked += 1
        before = len(tier.registry.list(limit=1000))
        try:
            tier.submit(tier.make_spec("print(1)", name="chaos-disk-2"))
            outcome.wrong("a submit on the full disk was accepted")
        except TiersError as e:
            text = str(e)
            if str(disk / "jobs") not in text or "No space left" not in text or "\n" in text:
                outcome.wrong(f"the submit on the full disk said: {text!r}")
            if progress:
                progress(f"  submit on a full disk: {text}")
        if len(tier.registry.list(limit=1000)) != before:
            outcome.wrong("the refused submit left a record")
    finally:
        for rec in tier.registry.list(limit=100):
            tier.cancel(rec)
        tier.close()
    return outcome
