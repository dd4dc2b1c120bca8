"""Slurm daemon scenarios on the shared test cluster: slurmctld stopped and started again
mid-job, one node's slurmd SIGKILLed mid-job, slurmdbd stopped during ``%tiers history``. The
faults are real daemon stops through jupyter_tiers/tools/sandbox/cluster.sh (as root); nothing of
jupyter_tiers is patched. Every scenario leaves the cluster as it found it (daemons up, the node
resumed), also when it fails half-way.

What the user sees is read where the user reads it: the watcher's statuses (what the widget
shows), ``%tiers jobs`` / ``%tiers history`` through the command line's own entry point (its
stdout and stderr), the job's log as ``job.follow`` delivers it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from jupyter_tiers.core.model import JobState, JobStatus
from tests.chaos import schedules
from tests.chaos.harness import Outcome, check_sequence, wait_until

GUARD = 300.0
SCRIPT = Path(__file__).resolve().parents[2] / "jupyter_tiers" / "tools" / "sandbox" / "cluster.sh"


def cluster(*args: str) -> str:
    """Run the cluster script (stop-ctld, start-node node2, ...); its output, or a RuntimeError
    with it when the step failed."""
    done = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=900,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"cluster.sh {' '.join(args)} exited {done.returncode}: "
                           f"{(done.stdout + done.stderr).strip()[-800:]}")
    return done.stdout


def slurm(*argv: str) -> str:
    """A Slurm command on this machine (the sandbox's slurm.conf), its stdout."""
    env = {**os.environ, "SLURM_CONF": str(Path(os.environ.get(
        "JT_CLUSTER_DIR", "/var/lib/jupyter-tiers-cluster")) / "etc" / "slurm.conf")}
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, env=env,
                          check=False).stdout


def user_command(tier: Any, *argv: str) -> tuple[int, str, str]:
    """``jupyter tiers ARGV`` as the user runs it (the same code as ``%tiers``), in its own
    process, against the tier's registry: exit status, stdout, stderr."""
    env = {**os.environ, "JUPYTER_TIERS_REGISTRY": str(tier.registry.path)}
    done = subprocess.run([sys.executable, "-m", "jupyter_tiers.faces.cli", *argv], capture_output=True,
                          text=True, timeout=GUARD, env=env, check=False)
    return done.returncode, done.stdout, done.stderr


def numbered_job(tier: Any, name: str, seconds: float, **options: Any) -> Any:
    """A job printing ``n RANK I`` 10 times a second on each rank for ``seconds``, or until
    the file ``stop`` appears in its job directory (``stop_job``); then ``end RANK COUNT``."""
    body = textwrap.dedent(f"""\
        import os, time
        rank = os.environ.get("RANK", "0")
        stop = os.path.join(os.environ["JT_JOB_DIR"], "stop")
        i = 0
        while i < {int(seconds * 10)} and not os.path.exists(stop):
            print("n", rank, i, flush=True)
            i += 1
            time.sleep(0.1)
        print("end", rank, i, flush=True)
        """)
    return tier.submit(tier.make_spec(body, name=name, **options))


def stop_job(tier: Any, job: Any) -> None:
    """Tell a numbered job to end now (the cluster's file system, over the tier's connection)."""
    tier.transport.run(["touch", "--", f"{job.record.jobdir}/stop"])


class Follower:
    """Follows a job's log in a thread (as the widget does) and keeps each rank's numbers."""

    def __init__(self, job: Any) -> None:
        self.seen: dict[str, list[int]] = {}
        self.written: dict[str, int] = {}  # each rank's count, from its "end" line
        self.error: str | None = None
        self._job = job
        self._thread = threading.Thread(target=self._run, name="chaos-slurm-follow", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for line in self._job.follow(timeout=3 * GUARD):
                parts = line.text.split()
                if len(parts) == 3 and parts[0] == "n" and parts[2].isdigit():
                    self.seen.setdefault(parts[1], []).append(int(parts[2]))
                elif len(parts) == 3 and parts[0] == "end" and parts[2].isdigit():
                    self.written[parts[1]] = int(parts[2])
        except Exception as e:  # a follow that breaks is what a scenario reports
            self.error = f"{type(e).__name__}: {e}"

    def join(self) -> None:
        self._thread.join(GUARD)


@contextlib.contextmanager
def watched(tier: Any, job: Any) -> Iterator[list[JobStatus]]:
    """The statuses the watcher delivers for ``job`` (what the widget shows), in order."""
    seen: list[JobStatus] = []
    sub = tier.watcher.watch(job.record, on_status=seen.append, follow_logs=False)
    try:
        yield seen
    finally:
        tier.watcher.unwatch(sub)


def ctld_outages(tier: Any, *, seed: int, outages: int = 1, down_s: float = 25.0,
                 progress: Callable[[str], None] | None = None) -> Outcome:
    """slurmctld stopped ``down_s`` seconds, ``outages`` times, each while a job runs (it
    prints numbered lines through the outage and some 15 s around it), at a seeded moment.
    Invariants: the watcher shows the controller unreachable (a banner naming the controller,
    one line, the job still RUNNING) while it is down, ``%tiers jobs`` says so in one line and
    keeps the recorded state, the job COMPLETED afterwards in the widget and the registry, every
    line once and in order. Recovery: from start-ctld (slurmctld's start, the nodes answering)
    to the first status with the controller reachable again."""
    outcome = Outcome(f"slurm: slurmctld down {down_s:.0f} s mid-job")
    for n, fault in enumerate(schedules.slurm_ctld_outages(seed, outages, down_s)):
        delay = fault.at
        job = numbered_job(tier, f"chaos-ctld-{n}", schedules.CTLD_JOB_S)
        follower = Follower(job)
        ended = None
        with watched(tier, job) as seen:
            try:
                if not wait_until(lambda: seen and seen[-1].state is JobState.RUNNING, GUARD):
                    outcome.wrong(f"job {job.id} never RUNNING: {seen[-1:]}")
                    continue
                time.sleep(delay)
                cluster("stop-ctld")
                stopped = time.monotonic()
                outcome.faults += 1
                try:
                    if progress:
                        progress(f"  slurmctld stopped ({n + 1}/{outages}), job {job.id}")
                    _check_down(outcome, tier, job, seen, down_s, progress)
                    time.sleep(max(0.0, down_s - (time.monotonic() - stopped)))
                finally:
                    back = time.monotonic()
                    cluster("start-ctld")
                if wait_until(lambda: seen[-1].controller_reachable, GUARD):
                    outcome.recover_s.append(time.monotonic() - back)
                    if progress:
                        progress(f"  shown reachable again {time.monotonic() - back:.1f} s after start-ctld")
                else:
                    outcome.wrong("the controller never shown reachable again")
            finally:
                stop_job(tier, job)  # the job ends after the outage (also when a check failed)
            ended = wait_until(lambda: seen[-1] if seen[-1].state.terminal else None, GUARD)
            if progress:
                progress(f"  job {job.id} shown {ended and ended.state.value}")
        follower.join()
        _check_lines(outcome, follower, follower.written or {"0": 1})
        final = ended.state if ended else None
        recorded = tier.registry.get(job.record.key)
        if final is not JobState.COMPLETED:
            outcome.wrong(f"job {job.id} shown {final} after the outage, not COMPLETED")
        if recorded is None or recorded.state != JobState.COMPLETED.value:
            outcome.wrong(f"job {job.id} recorded {recorded and recorded.state}, not COMPLETED")
    return outcome


def _check_down(outcome: Outcome, tier: Any, job: Any, seen: list[JobStatus], down_s: float,
                progress: Callable[[str], None] | None) -> None:
    """While the controller is down: the widget's banner, and ``%tiers jobs``."""
    # `%tiers jobs` in a thread meanwhile: its squeue, like the watcher's, waits out Slurm's own
    # connect timeouts (some 20 s here) before it says the controller does not answer.
    said_by: list[tuple[int, str, str]] = []
    listing = threading.Thread(target=lambda: said_by.append(
        user_command(tier, "jobs", "--profile", tier.profile.name)), name="chaos-jobs", daemon=True)
    listing.start()
    banner = wait_until(lambda: next((s for s in seen if not s.controller_reachable), None), down_s + 60)
    message = banner.message or "" if banner else ""
    if banner is None:
        outcome.wrong("no status with the controller unreachable while it was down")
    elif "controller" not in message or "\n" in message or "Traceback" in message:
        outcome.wrong(f"the banner does not name the controller in one line: {message!r}")
    elif banner.state is not JobState.RUNNING:
        outcome.wrong(f"shown {banner.state.value} while the controller was down")
    elif progress:
        progress(f"  widget: {message}")
    listing.join(GUARD)
    code, out, err = said_by[0] if said_by else (-1, "", "%tiers jobs did not return")
    said = [ln for ln in out.splitlines() if "states as last recorded" in ln]
    row = next((ln for ln in out.splitlines() if ln.startswith(job.id + " ")), "")
    if code != 0 or len(said) != 1 or err.strip() or "Traceback" in out:
        outcome.wrong(f"%tiers jobs with the controller down said ({code}) {out!r} {err!r}")
    elif "RUNNING" not in row:
        outcome.wrong(f"%tiers jobs lost the job's recorded RUNNING: {out!r}")
    elif progress:
        progress(f"  %tiers jobs: {said[0].strip()}")


def slurmd_kills(tier: Any, *, seed: int, kills: int = 1,
                 progress: Callable[[str], None] | None = None) -> Outcome:
    """A 2-node job (``--exclusive``: no one else's job shares its nodes) printing numbered
    lines; at a seeded moment one of its nodes' slurmd is SIGKILLed, ``kills`` times (a job
    each). slurmctld gives a node up only after SlurmdTimeout (300 s in the sandbox, longer
    than the job), so the scenario then sets the node DOWN as slurmctld would (``scontrol
    update state=down``): the job's end goes the same way (NODE_FAIL). Afterwards the node is
    started again and resumed (``cluster.sh start-node``).
    Invariants: the job ends NODE_FAIL, the status's reason names the killed node and the rank
    that ran there, the registry records NODE_FAIL, each rank's lines arrived once and in order
    up to the end, the node usable again. Recovery: from the kill to the end shown."""
    outcome = Outcome("slurm: one slurmd SIGKILLed mid-job")
    for n, fault in enumerate(schedules.slurm_slurmd_kills(seed, kills)):
        delay = fault.at
        job = numbered_job(tier, f"chaos-slurmd-{n}", schedules.SLURMD_JOB_S,
                           nodes=schedules.SLURMD_NODES, exclusive=True)
        follower = Follower(job)
        victim = None
        with watched(tier, job) as seen:
            try:
                placed = wait_until(lambda: seen and all(r.node for r in seen[-1].ranks)
                                    and seen[-1].state is JobState.RUNNING and seen[-1], GUARD)
                if not placed:
                    outcome.wrong(f"job {job.id} never RUNNING on its nodes: {seen[-1:]}")
                    continue
                time.sleep(delay)
                rank = placed.ranks[int(fault.kind) % len(placed.ranks)]
                victim = rank.node
                others = set(slurm("squeue", "-h", "-w", str(victim), "-o", "%i").split()) - {job.id}
                if others:  # exclusive: cannot happen; never fail another user's job
                    outcome.wrong(f"{victim} runs other jobs too ({sorted(others)}): not killed")
                    continue
                cluster("stop-node", str(victim), "--kill")
                killed = time.monotonic()
                outcome.faults += 1
                slurm("scontrol", "update", f"nodename={victim}", "state=down",
                      "reason=chaos: slurmd killed")
                if progress:
                    progress(f"  slurmd of {victim} (rank {rank.rank}) SIGKILLed, job {job.id}")
                ended = wait_until(lambda: seen[-1] if seen[-1].state.terminal else None, GUARD)
                if ended is None:
                    outcome.wrong(f"job {job.id} did not end after {victim}'s slurmd was killed")
                    continue
                outcome.recover_s.append(time.monotonic() - killed)
                reason = ended.reason or ""
                if ended.state is not JobState.NODE_FAIL:
                    outcome.wrong(f"job {job.id} ended {ended.state.value}, not NODE_FAIL: {reason}")
                elif str(victim) not in reason or f"rank {rank.rank}" not in reason or "\n" in reason:
                    outcome.wrong(f"the end does not name {victim} and rank {rank.rank}: {reason!r}")
                elif progress:
                    progress(f"  shown: {ended.state.value} — {reason}")
            finally:
                if victim:
                    cluster("start-node", str(victim))
        follower.join()
        _check_lines(outcome, follower, {r: 0 for r in follower.seen} or {"0": 1}, upto_seen=True)
        for rank, numbers in sorted(_logged(job).items()):  # what the log file holds, rank by rank
            missing = numbers - set(follower.seen.get(rank, []))
            if missing:
                outcome.lost += len(missing)
                outcome.problems.append(f"rank {rank}: {len(missing)} logged lines never followed")
        recorded = tier.registry.get(job.record.key)
        if recorded is None or recorded.state != JobState.NODE_FAIL.value:
            outcome.wrong(f"job {job.id} recorded {recorded and recorded.state}, not NODE_FAIL")
        state = slurm("sinfo", "-h", "-N", "-n", str(victim), "-o", "%T").split()
        if victim and not all(s in ("idle", "mixed", "allocated", "completing") for s in state):
            outcome.wrong(f"{victim} not back in service: {state}")
    return outcome


def dbd_outages(tier: Any, *, seed: int, outages: int = 1,
                progress: Callable[[str], None] | None = None) -> Outcome:
    """slurmdbd stopped, ``outages`` times: ``%tiers history`` (the list and one job) while it
    is down, and a job run to its end meanwhile (slurmctld keeps its record for slurmdbd).
    Invariants: each history call says one line naming slurmdbd (no traceback, exit 1, nothing
    on stdout); after start-dbd, history works again and shows the job run meanwhile as
    COMPLETED (its record not lost). Recovery: from start-dbd returning to that job in history."""
    outcome = Outcome("slurm: slurmdbd down during %tiers history")
    name = tier.profile.name
    for n, _fault in enumerate(schedules.slurm_dbd_outages(outages)):
        code, out, err = user_command(tier, "history", "--profile", name, "--limit", "5")
        if code != 0:
            outcome.wrong(f"history before the outage failed: {err.strip()}")
        cluster("stop-dbd")
        outcome.faults += 1
        try:
            if progress:
                progress(f"  slurmdbd stopped ({n + 1}/{outages})")
            job = tier.submit(tier.make_spec("print('while slurmdbd was down')", name=f"chaos-dbd-{n}"))
            for argv in (["history", "--profile", name], ["history", "--profile", name, "--job", job.id]):
                code, out, err = user_command(tier, *argv)
                outcome.checked += 1
                lines = err.strip().splitlines()
                if code != 1 or out.strip() or len(lines) != 1 or "slurmdbd" not in err or "Traceback" in err:
                    outcome.wrong(f"{' '.join(argv)} with slurmdbd down said ({code}) {out!r} {err!r}")
                elif progress and argv[-1] == name:
                    progress(f"  {lines[0]}")
            status = job.wait(timeout=GUARD)
            if status.state is not JobState.COMPLETED:
                outcome.wrong(f"job {job.id} run while slurmdbd was down ended {status.state.value}")
        finally:
            cluster("start-dbd")
        back = time.monotonic()

        def listed(job_id: str = job.id) -> bool:
            code, out, _ = user_command(tier, "history", "--profile", name, "--job", job_id)
            return code == 0 and any(ln.startswith(job_id + " ") and "COMPLETED" in ln
                                     for ln in out.splitlines())

        outcome.checked += 1
        if wait_until(listed, GUARD, interval=1.0):
            outcome.recover_s.append(time.monotonic() - back)
        else:
            outcome.lost += 1
            outcome.problems.append(f"job {job.id} (run while slurmdbd was down) not in history after")
    return outcome


def _logged(job: Any) -> dict[str, set[int]]:
    """Each rank's line numbers in the job's log file on the cluster."""
    found: dict[str, set[int]] = {}
    for line in job.logs().splitlines():
        parts = line.split(":", 1)[-1].split()
        if len(parts) == 3 and parts[0] == "n" and parts[2].isdigit():
            found.setdefault(parts[1], set()).add(int(parts[2]))
    return found


def _check_lines(outcome: Outcome, follower: Follower, written: dict[str, int],
                 upto_seen: bool = False) -> None:
    """Each rank's numbered lines: ``written[rank]`` of them, or (``upto_seen``: a job that was
    killed) as many as the highest number seen; none lost in between, none repeated."""
    if follower.error:
        outcome.wrong(f"the log follow broke: {follower.error}")
    for rank, count in written.items():
        got = follower.seen.get(rank, [])
        result = check_sequence(got, (max(got) + 1 if got else 0) if upto_seen else count)
        outcome.checked += len(got)
        outcome.lost += result.lost
        outcome.duplicated += result.duplicated
        if result.out_of_order:
            outcome.wrong(f"rank {rank}: {result.out_of_order} lines out of order")
        if result.lost or result.duplicated:
            outcome.problems.append(f"rank {rank}: {result.lost} lost, {result.duplicated} repeated")


JOBS_ROOT = Path("/var/lib/jupyter-tiers-jobs")  # where the test profiles' workdirs live


@contextlib.contextmanager
def small_cluster_disk(size: str = "2m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on the cluster side (this machine; root) under the test
    profiles' workdir root, unmounted and removed after."""
    mount = JOBS_ROOT / f"chaos-disk-{secrets.token_hex(3)}"
    mount.mkdir(parents=True)
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(mount)],
                       check=True, capture_output=True, timeout=60)
        try:
            yield mount
        finally:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=60, check=False)
    finally:
        with contextlib.suppress(OSError):
            mount.rmdir()


def cluster_disk_full(tier: Any, *, progress: Callable[[str], None] | None = None) -> Outcome:
    """The job directory's file system full on the cluster side: the profile's workdir on a
    2 MiB tmpfs. A job logging as fast as it can fills it; then a submit finds it full.
    Invariants: while the job runs on the full disk the widget shows one line naming its job
    directory and the full disk (before: RUNNING with nothing said while its output was lost);
    the job cancels cleanly; the submit on the full disk is refused with one line naming the
    workdir and the full disk, leaves no registry record and no job on the cluster.
    Recovery: from the submit to the full disk shown."""
    from jupyter_tiers.config.profiles import Profile
    from jupyter_tiers.core.errors import TiersError
    from jupyter_tiers.slurm.tier import SlurmTier

    outcome = Outcome("slurm: job directory's disk full (cluster side)")
    with small_cluster_disk() as mount:
        workdir = f"{mount}/jobs"
        small = SlurmTier(Profile(name=tier.profile.name, tier="slurm",
                                  settings={**tier.profile.settings, "workdir": workdir}),
                          tier.registry)
        try:
            started = time.monotonic()
            job = small.submit(small.make_spec(
                "i = 0\nwhile True:\n    print('.' * 60, 'n', i, flush=True)\n    i += 1\n",
                name="chaos-cdisk"))
            outcome.faults += 1
            with watched(small, job) as seen:
                note = wait_until(lambda: next((s for s in seen if s.message and "full" in s.message),
                                               None), GUARD)
                outcome.checked += 1
                if note is None:
                    outcome.wrong(f"job {job.id} on a full disk: nothing said ({seen[-1:]})")
                else:
                    outcome.recover_s.append(time.monotonic() - started)
                    text = note.message or ""
                    if job.record.jobdir not in text or "\n" in text or "Traceback" in text:
                        outcome.wrong(f"job {job.id}: the full disk said as {text!r}")
                    elif progress:
                        progress(f"  widget: {text}")
            outcome.faults += 1
            outcome.checked += 1
            before = len(small.registry.list(limit=1000))
            name = f"chaos-cdisk-{secrets.token_hex(3)}"
            try:
                small.submit(small.make_spec("print(1)", name=name))
                outcome.wrong("a submit on the full disk was accepted")
            except TiersError as e:
                text = str(e)
                if workdir not in text or "No space left" not in text or "\n" in text:
                    outcome.wrong(f"the submit on the full disk said: {text!r}")
                elif progress:
                    progress(f"  submit: {text}")
            if len(small.registry.list(limit=1000)) != before:
                outcome.wrong("the refused submit left a registry record")
            if slurm("squeue", "-h", "-a", "-t", "all", "-n", name, "-o", "%i").split():
                outcome.duplicated += 1
                outcome.problems.append(f"the refused submit left a job {name} on the cluster")
            small.cancel(job.record)
            status = job.wait(timeout=GUARD)
            if status.state is not JobState.CANCELLED:
                outcome.wrong(f"job {job.id} on the full disk ended {status.state.value} after cancel")
        finally:
            for rec in small.registry.list(limit=100):
                if rec.jobdir.startswith(workdir):
                    small.cancel(rec)
            small.close()
    return outcome
