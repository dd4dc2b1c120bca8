"""Every chaos scenario's fault schedule, built from a seed alone (pure: no process, no clock).

A :class:`Fault` says what it hits (its target), where in that target's life (``at``) and the
span the target is known to have there, in the same unit: a kernel's operations, a job's lines,
the seconds a rollout is known to last at least, a share of a transfer. Each plan below draws its
faults inside that span, so that any seed is a valid experiment: a fault never falls after its
target has ended. Where a target's life is open-ended (a job that writes until the harness tells
it to stop, a service that runs until it is deleted) the span is ``(0, inf)``: the workload runs
until its faults are delivered. A fault that still misses its target at run time (a submit faster
than the one it was measured on) is counted as undelivered by the scenario, never as a wrong
state of the product.

tests/unit/test_chaos_schedules.py builds the bounded and the ``--full`` plans of every scenario
for 200 seeds and checks each fault lands inside its target's span.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date

#: The bounded run's sizes (CI's tests/chaos and ``bench/chaos.py``), and ``--full``'s.
BOUNDED = {"restarts": 5, "deletions": 1, "evictions": 2, "outages": 1, "jobs": 200, "services": 50,
           "registry_faults": 2, "kills": 1, "cuts": 10, "lines": 1000, "submits": 5,
           "download_cuts": 3, "download_mb": 32, "sync_submits": 3, "clock_steps": 4,
           "ctld_outages": 1, "ctld_down_s": 20, "slurmd_kills": 1, "dbd_outages": 1,
           "lab_restarts": 2}
FULL = {"restarts": 20, "deletions": 5, "evictions": 6, "outages": 5, "jobs": 2000, "services": 500,
        "registry_faults": 20, "kills": 10, "cuts": 100, "lines": 30000, "submits": 50,
        "download_cuts": 20, "download_mb": 256, "sync_submits": 20, "clock_steps": 20,
        "ctld_outages": 3, "ctld_down_s": 60, "slurmd_kills": 5, "dbd_outages": 3,
        "lab_restarts": 10}
OPEN = math.inf  # a target that lives until the harness ends it

# --- the spans the scenarios' workloads are built to have ---------------------------------------
#: k8s: each replica of the rollout scenario listens this long after it starts. The product renders
#: maxSurge 1 / maxUnavailable 0, so a rollout of REPLICAS replaces them one after another and
#: lasts at least REPLICAS * LISTEN_AFTER_S.
K8S_REPLICAS = 2
K8S_LISTEN_AFTER_S = 1.5
K8S_ROLLOUT_MIN_S = K8S_REPLICAS * K8S_LISTEN_AFTER_S
#: local: a replica of the mid-rollout scenario listens this long after it starts (tests/chaos/
#: kernel_worker.py); the kernel says "SVC" once apply returned, so the rollout has at least this
#: long left minus apply's own time (kills are drawn in the first third of it).
LOCAL_LISTEN_AFTER_S = 3.0
#: local: lines each rank of the kernel-kill job writes (both ranks: twice as many).
KERNEL_JOB_LINES = 300
#: slurm: the seconds each numbered job writes at least (scenarios_slurm.numbered_job).
CTLD_JOB_S = 300.0
SLURMD_JOB_S = 120.0
SLURMD_NODES = 2
#: ssh: the line stream's job writes 100 lines a second at most, and on until its cuts are done.
LINES_PER_S = 100.0


@dataclass(frozen=True)
class Fault:
    """One scheduled fault: ``at`` in ``unit`` inside the target's ``span`` ``[low, high)``;
    ``kind`` says how (a signal, a side), ``hold`` how long it lasts where it lasts."""

    target: str
    at: float
    span: tuple[float, float]
    unit: str
    kind: str = ""
    hold: float = 0.0

    @property
    def inside(self) -> bool:
        return self.span[0] <= self.at < self.span[1]


def _rng(seed: int, scenario: str) -> random.Random:
    """One stream per scenario (the same seed draws different moments for different scenarios)."""
    return random.Random(f"{seed}/{scenario}")


# --- Kubernetes (tests/chaos/scenarios_k8s.py) -------------------------------------------------
def k8s_api_restarts(seed: int, restarts: int) -> list[Fault]:
    """The API server stopped ``at`` seconds after rollout ``i`` began (in its first half),
    down ``hold`` seconds."""
    rng = _rng(seed, "k8s-restarts")
    return [Fault(f"rollout {i}", rng.uniform(0.0, K8S_ROLLOUT_MIN_S / 2), (0.0, K8S_ROLLOUT_MIN_S),
                  "s after the rollout began", "restart", rng.uniform(0.1, 1.0)) for i in range(restarts)]


def k8s_pod_deletions(seed: int, deletions: int) -> list[Fault]:
    """A replica (``kind``: its index among the live pods, sorted) deleted ``at`` seconds after
    the service settled; the service runs until the scenario deletes it."""
    rng = _rng(seed, "k8s-deletions")
    return [Fault(f"replica of round {i}", rng.uniform(0.2, 1.5), (0.0, OPEN), "s after settled",
                  str(rng.randrange(K8S_REPLICAS))) for i in range(deletions)]


def k8s_evictions(seed: int, evictions: int) -> list[Fault]:
    """The node's pods evicted ``at`` seconds after the service settled, by memory pressure
    (even rounds) or a drain (odd rounds)."""
    rng = _rng(seed, "k8s-evictions")
    return [Fault(f"the node's pods, round {i}", rng.uniform(0.2, 1.5), (0.0, OPEN), "s after settled",
                  "memory pressure" if i % 2 == 0 else "drain") for i in range(evictions)]


def k8s_outages(seed: int, outages: int) -> list[Fault]:
    """The API server down past stale_after, then ``hold`` seconds more."""
    rng = _rng(seed, "k8s-outages")
    return [Fault(f"the served service, outage {i}", 0.0, (0.0, OPEN), "s after READY", "stop",
                  rng.uniform(0.0, 1.0)) for i in range(outages)]


# --- the registry (tests/chaos/scenarios_registry.py) ------------------------------------------
def registry_operations(jobs: int, services: int, writers: int) -> int:
    """How many operations each writer kernel does (tests/chaos/registry_worker.py's ``ops``)."""
    per = jobs // writers + services // writers
    return per + per // 4


def registry_concurrent(seed: int, jobs: int, services: int, faults: int, writers: int = 2) -> list[Fault]:
    """A kernel (``target`` ``k<N>``) SIGSTOPped ``hold`` seconds or SIGKILLed and started again,
    once it has done ``at`` of its operations. A kernel waits before its last operation until the
    harness has delivered its faults, so any ``at`` below that last one is met while it runs."""
    rng = _rng(seed, "registry-concurrent")
    total = registry_operations(jobs, services, writers)
    plan = []
    for _ in range(faults):
        kernel = f"k{rng.randrange(writers)}"
        at = int(rng.uniform(0.05, 0.85) * total)
        kind = "SIGSTOP" if rng.random() < 0.5 else "SIGKILL"
        plan.append(Fault(kernel, at, (0, total - 1), "operations done", kind,
                          rng.uniform(0.3, 2.0) if kind == "SIGSTOP" else 0.0))
    return sorted(plan, key=lambda f: f.at)


DAMAGES = ("truncated", "header overwritten", "a page overwritten")


def registry_damages(seed: int) -> list[Fault]:
    """Each way of DAMAGES at a seeded share of the file's pages (past the first, before the last)."""
    rng = _rng(seed, "registry-damaged")
    return [Fault("the registry file", 0.0 if how == "header overwritten" else rng.random(), (0.0, 1.0),
                  "share of its pages", how) for how in DAMAGES]


# --- the local tier (tests/chaos/scenarios_local.py, scenarios_clock.py) ------------------------
def local_supervisor_kills(seed: int, kills: int) -> list[Fault]:
    """A job's supervisor SIGKILLed ``at`` seconds after both ranks logged (they log until killed)."""
    rng = _rng(seed, "local-supervisor")
    return [Fault(f"job {i}", rng.uniform(0.0, 1.0), (0.0, OPEN), "s after both ranks logged", "SIGKILL")
            for i in range(kills)]


def local_kernel_kills(seed: int, kills: int, lines: int = KERNEL_JOB_LINES) -> list[Fault]:
    """The following kernel SIGKILLed after it had ``at`` of the job's 2 x ``lines`` lines."""
    rng = _rng(seed, "local-kernel")
    return [Fault(f"job {i}", rng.randint(20, lines), (1, 2 * lines), "lines followed", "SIGKILL")
            for i in range(kills)]


def local_rollout_kills(seed: int, kills: int) -> list[Fault]:
    """The kernel SIGKILLed ``at`` seconds after its apply returned (replicas still not listening)."""
    rng = _rng(seed, "local-rollout")
    return [Fault(f"rollout {i}", rng.uniform(0.0, LOCAL_LISTEN_AFTER_S / 3), (0.0, LOCAL_LISTEN_AFTER_S),
                  "s after apply returned", "SIGKILL") for i in range(kills)]


CLOCK_OFFSETS = ("+1h", "+0", "-1h", "+0")  # each a step of one hour from the one before


def local_clock_steps(seed: int, steps: int) -> list[Fault]:
    """The wall clock set to ``kind`` ``at`` seconds after the previous step was seen; the job
    writes until told to stop."""
    rng = _rng(seed, "local-clock")
    return [Fault("the job", rng.uniform(0.2, 1.5), (0.0, OPEN), "s after the previous step",
                  CLOCK_OFFSETS[i % len(CLOCK_OFFSETS)]) for i in range(steps)]


def lab_restarts(seed: int, restarts: int, signals: tuple[str, ...] = ("SIGTERM", "SIGKILL")) -> list[Fault]:
    """The Jupyter server stopped by ``kind`` ``at`` seconds after the round's jobs showed
    RUNNING (one runs 600 s, one until its gate opens after the stop)."""
    rng = _rng(seed, "lab-restarts")
    return [Fault(f"round {i}", rng.uniform(0.0, 1.0), (0.0, OPEN), "s after RUNNING shown",
                  signals[i % len(signals)]) for i in range(restarts)]


# --- SSH (tests/chaos/scenarios_ssh.py) ---------------------------------------------------------
def ssh_stream_cuts(seed: int, cuts: int, lines: int, server_share: float = 0.5) -> list[Fault]:
    """Cuts at ``at`` seconds after the first line, spread over the ``lines / 100`` seconds the
    job writes at least (it writes on until the cuts are done)."""
    rng = _rng(seed, "ssh-stream")
    gap = max(0.8, 0.8 * lines / LINES_PER_S / cuts)
    at, plan = 0.0, []
    for i in range(cuts):
        at += rng.uniform(0.2, gap)
        side = "server" if rng.random() < server_share else "client"
        plan.append(Fault(f"cut {i}", at, (0.0, lines / LINES_PER_S), "s after the first line", side))
    return plan


def ssh_submit_cuts(seed: int, submits: int, server_share: float = 0.0) -> list[Fault]:
    """Each submit's connection cut ``at`` (a share) of the way through an uncut submit measured
    first on a live connection (a cut submit reconnects first, so it lasts longer)."""
    rng = _rng(seed, "ssh-submit")
    return [Fault(f"submit {i}", rng.uniform(0.05, 0.8), (0.0, 1.0), "share of an uncut submit",
                  "server" if rng.random() < server_share else "client") for i in range(submits)]


def ssh_download_cuts(seed: int, cuts: int) -> list[Fault]:
    """The download's connection cut once ``at`` of its bytes are written, in order."""
    rng = _rng(seed, "ssh-download")
    return [Fault(f"cut {i}", share, (0.0, 1.0), "share of the bytes", "client")
            for i, share in enumerate(sorted(rng.uniform(0.05, 0.95) for _ in range(cuts)))]


def ssh_sync_cuts(seed: int, submits: int) -> list[Fault]:
    """Each ``--sync`` submit's connection cut ``at`` (a share) of the way through the quickest
    uncut ``--sync`` submit of a quarter-changed project measured first."""
    rng = _rng(seed, "ssh-sync")
    return [Fault(f"sync submit {i}", rng.uniform(0.05, 0.8), (0.0, 1.0), "share of an uncut submit",
                  "client") for i in range(submits)]


# --- the Slurm daemons (tests/chaos/scenarios_slurm.py) -----------------------------------------
def slurm_ctld_outages(seed: int, outages: int, down_s: float) -> list[Fault]:
    """slurmctld stopped ``at`` seconds into a job that writes CTLD_JOB_S seconds (or until told)."""
    rng = _rng(seed, "slurm-ctld")
    return [Fault(f"job {i}", rng.uniform(2.0, 6.0), (0.0, CTLD_JOB_S - down_s), "s after RUNNING",
                  "stop-ctld", down_s) for i in range(outages)]


def slurm_slurmd_kills(seed: int, kills: int) -> list[Fault]:
    """The slurmd of the node of rank ``kind`` SIGKILLed ``at`` seconds into a SLURMD_JOB_S job."""
    rng = _rng(seed, "slurm-slurmd")
    return [Fault(f"job {i}", rng.uniform(2.0, 6.0), (0.0, SLURMD_JOB_S), "s after RUNNING",
                  str(rng.randrange(SLURMD_NODES))) for i in range(kills)]


def slurm_dbd_outages(outages: int) -> list[Fault]:
    """slurmdbd stopped before the history calls of round ``i`` (nothing drawn)."""
    return [Fault(f"round {i}", 0.0, (0.0, OPEN), "s after the first history", "stop-dbd")
            for i in range(outages)]


def every_plan(seed: int, size: dict[str, int]) -> dict[str, list[Fault]]:
    """Every scenario's plan at ``size`` (BOUNDED or FULL), by scenario."""
    return {
        "k8s: API server restarts": k8s_api_restarts(seed, size["restarts"]),
        "k8s: pod deletions": k8s_pod_deletions(seed, size["deletions"]),
        "k8s: node evictions": k8s_evictions(seed, size["evictions"]),
        "k8s: API outages": k8s_outages(seed, size["outages"]),
        "registry: concurrent": registry_concurrent(seed, size["jobs"], size["services"],
                                                    size["registry_faults"]),
        "registry: damaged": registry_damages(seed),
        "local: supervisor kills": local_supervisor_kills(seed, size["kills"]),
        "local: kernel kills": local_kernel_kills(seed, size["kills"]),
        "local: kernel kills mid-rollout": local_rollout_kills(seed, size["kills"]),
        "local: clock steps": local_clock_steps(seed, size["clock_steps"]),
        "lab-restart": lab_restarts(seed, size["lab_restarts"]),
        "ssh: stream cuts": ssh_stream_cuts(seed, size["cuts"], size["lines"]),
        "ssh: submit cuts": ssh_submit_cuts(seed, size["submits"], 0.5),
        "ssh: download cuts": ssh_download_cuts(seed, size["download_cuts"]),
        "ssh: sync cuts": ssh_sync_cuts(seed, size["sync_submits"]),
        "slurm: slurmctld outages": slurm_ctld_outages(seed, size["ctld_outages"], size["ctld_down_s"]),
        "slurm: slurmd kills": slurm_slurmd_kills(seed, size["slurmd_kills"]),
        "slurm: slurmdbd outages": slurm_dbd_outages(size["dbd_outages"]),
    }


# --- the seed of the bounded run in CI ----------------------------------------------------------
def date_seed(day: date) -> int:
    """The seed of a day: its date as a number, 2026-12-04 -> 20261204 (a new schedule each day,
    the same all day, so that a failure can be run again)."""
    return int(day.strftime("%Y%m%d"))


def ci_seed(environ: Mapping[str, str], today: date) -> tuple[int, str]:
    """The bounded run's seed and where it came from: ``JT_CHAOS_SEED`` when set, else the date."""
    given = environ.get("JT_CHAOS_SEED", "").strip()
    if given:
        return int(given), "JT_CHAOS_SEED"
    return date_seed(today), f"the date, {today.isoformat()} UTC"


def replay_line(seed: int, source: str) -> str:
    """What the test output says, so that a failure can be replayed with the same schedule."""
    return (f"chaos seed {seed} (from {source}). Replay: JT_CHAOS_SEED={seed} .venv/bin/python -m "
            f"pytest -p no:cacheprovider tests/chaos  or  .venv/bin/python bench/chaos.py --seed {seed}")
