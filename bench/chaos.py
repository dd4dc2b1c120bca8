"""Chaos: faults injected many times over into the real components, and what survived as numbers.

Each scenario (tests/chaos/scenarios_*.py) runs a workload, injects faults from the outside at
moments drawn from ``--seed``, then checks invariants (every numbered log line exactly once and
in order, the state after recovery equal to a fresh read, no registry record lost or repeated,
one clear line per fault at most). The table: scenario, faults injected, lines/records/events
checked, lost, duplicated, wrong states, time to recover (p50/p99).

Scenarios (bounded default / ``--full``):
- k8s: the emulator's API server restarted on its port a moment after a rollout began, inside
  it (the replicas listen 1.5 s after they start, so a rollout lasts 3 s at least) (5 / 20),
  the service followed as its widget follows it (status watch, pod log followers); recovery is
  from the server answering again to the watch seeing a change made then;
- k8s: a pod deleted by hand (1 / 5); recovery is to the replacement's first followed line;
- k8s: every pod of the node evicted mid-serving (2 / 6), alternately by the kubelet under memory
  pressure (the pods stay Failed/Evicted, the ReplicaSet replaces them) and drained through the
  Eviction API: replacements followed, every line of an evicted pod once, the status naming
  "Evicted: The node was low on resource: memory" and never counting an evicted pod as ready;
  recovery is from the eviction to READY with only replacements;
- k8s: the API server down longer than the profile's stale_after (3 s here) (1 / 5): the followed
  status turns UNKNOWN (last seen READY, "reconnecting (attempt N, next in M s)"), the registry
  keeps READY; recovery is from the server answering again to READY shown again;
- registry: two kernels adding/removing 200 jobs + 50 services (2,000 + 500 with --full) while
  the server lists, one kernel SIGSTOPped or SIGKILLed and restarted (2 / 20); recovery is to
  that kernel's next finished operation;
- registry: the file truncated, its header and a page overwritten, read by `jupyter tiers jobs`;
- ssh (when the Slurm test cluster runs): this process's own SSH connection cut while a job's
  1,000 (30,000 with --full: 5 min) numbered lines are followed (10 / 100 cuts), half of them
  client side (`ss -K` on its socket), half server side (the sshd child serving it SIGKILLed,
  found by our local port with `ss -tnp`); recovery is from a cut to the next line received;
- ssh: this process's own SSH connection cut (client or server side, half each) once in each
  of 5 / 50 submits, at a seeded share of the time an uncut submit (made first) took, into
  `tier.submit` (the job's files going up, sbatch, its answer): one job on the
  cluster and one registry record per submit; recovery is from the cut to submit returning;
- ssh: a 32 MiB (256 MiB with --full) file fetched with `job.download` while the connection is
  cut 3 / 20 times mid-transfer: sha256 equal to the cluster's, no .part left, no traceback;
  recovery is from a cut to the next chunk written;
- ssh: 3 / 20 submits with --sync of an 8 MiB, 40-file project (a quarter changed before each),
  each cut once a seeded share of an uncut one's time in (two uncut first): one job each, its
  snapshot the project byte for byte (sha256);
- local: a job's supervisor SIGKILLed mid-job, then reattached from a new tier (1 / 10);
- local: a kernel process following a 2-rank job SIGKILLed after a seeded number of lines, a new
  kernel process attaching and following on from the last line it had (1 / 10): the job
  COMPLETED, each rank's lines once, in order, equal to the log file;
- local: a kernel process SIGKILLed 0..1 s after applying a 2-replica local service (replicas
  slow to listen: 3 s after they start), a new kernel process attaching (1 / 10): READY 2/2,
  answering, and after its delete no process left; recovery is from the kill to READY seen;
- local: the wall clock of a kernel and its 30-min-limit job stepped +1 h, back, -1 h, back...
  (4 / 20 steps) under Debian's libfaketime (never the machine's clock; skipped without it or a
  C compiler): elapsed (status, %tiers jobs row) never negative, ahead of real time or going
  back, the job COMPLETED (no false TIMEOUT), its log lines once each;
- lab-restart (with Debian's chromium): the Jupyter server stopped by SIGTERM or SIGKILL in turn
  (2 / 10) under two browser tabs with the Tiers sidebar open on local-tier jobs, and started again
  on its port: each tab reconnects exactly once, every row once, a job that ended meanwhile shows
  COMPLETED, a later job and a cancel from one tab show in both; recovery is from the new server
  answering to both tabs connected again (the sidebar's jittered back-off included);
- disk (root): the local tier's workdir on a 2 MiB tmpfs; a job logging as fast as it can fills
  it (FAILED, one line naming the job directory and the full disk, nothing left running, no
  temporary file left), then a submit on the full disk (refused, one line naming the workdir).
- slurm (root; the Slurm test cluster's own daemons, through cluster.sh): slurmctld stopped
  20 s (60 s with --full) mid-job, 1 / 3 times: the widget's banner names the controller, one
  line from `%tiers jobs`, the job COMPLETED afterwards, every line once; recovery is from
  start-ctld to the controller shown reachable again;
- slurm: one node's slurmd SIGKILLed mid-job (a 2-node --exclusive job), the node then set
  DOWN as slurmctld does after SlurmdTimeout (300 s in the sandbox) (1 / 5): NODE_FAIL, the
  reason names the node and its rank, the node started again and resumed; recovery is from the
  kill to the end shown;
- slurm: slurmdbd stopped (1 / 3): `%tiers history` one line naming slurmdbd, a job run
  meanwhile in history after start-dbd; recovery is from start-dbd to that job listed;
- slurm: the job directory's disk full on the cluster side (the profile's workdir on a 2 MiB
  tmpfs): a job filling it is shown with one line naming its directory and the full disk, a
  submit on it refused with one line naming the workdir (no record, no job); recovery is from
  the submit to the full disk shown.

Every fault is drawn inside the span its target has (tests/chaos/schedules.py: a kernel's
operations, a job's lines, the time a rollout lasts at least), so any seed is a valid experiment.
A fault that still finds its target ended is counted in the "undelivered" column, never as a
wrong state. Exit status: 0 all clean, 1 something lost, repeated or wrong, 3 clean but some
fault undelivered (the run did not test all it was to).

The bounded subset runs in CI as tests/chaos/ (its seed from the date, printed) and fails on any
loss. Nothing is timed as an assertion; every wait is bounded only so that a broken component
fails instead of hanging.

Run: .venv/bin/python bench/chaos.py [--full] [--seed 18]
     [--only k8s,registry,local,ssh,lab-restart,disk,slurm]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jupyter_tiers.tools import sandbox  # noqa: E402
from tests.chaos import (  # noqa: E402
    scenarios_clock,
    scenarios_k8s,
    scenarios_local,
    scenarios_registry,
    scenarios_slurm,
    scenarios_ssh,
)
from tests.chaos.harness import Outcome, table  # noqa: E402
from tests.chaos.schedules import BOUNDED, FULL  # noqa: E402

CLUSTER_ENV = Path(os.environ.get("JT_CLUSTER_DIR", "/var/lib/jupyter-tiers-cluster")) / "cluster.env"
GROUPS = ("k8s", "registry", "local", "ssh", "lab-restart", "disk", "slurm")


def _ssh_run(workdir: Path, say: Callable[[str], None],
             scenario: Callable[[Any, str, int], Outcome]) -> Outcome:
    """An SSH scenario on the Slurm test cluster (its sshd; only this process's connections):
    ``scenario(tier, host, port)``."""
    from jupyter_tiers.config.profiles import load_config
    from jupyter_tiers.config.registry import Registry
    from jupyter_tiers.slurm.tier import SlurmTier
    from tests.cluster.conftest import profile_yaml

    env = sandbox.read_cluster_env(CLUSTER_ENV)
    (workdir / "tiers.yaml").write_text(profile_yaml(env))
    os.environ["JUPYTER_TIERS_CONFIG"] = str(workdir / "tiers.yaml")
    tier = SlurmTier(load_config().profile("box"), Registry(workdir / "registry.sqlite"))
    try:
        return scenario(tier, env["JT_SSH_HOST"], int(env["JT_SSH_PORT"]))
    finally:
        for rec in tier.registry.list(limit=1000):
            tier.cancel(rec)
        tier.close()


def _lab_restarts(workdir: Path, say: Callable[[str], None], *, seed: int, restarts: int) -> Outcome:
    """The Jupyter-server scenario on a JupyterLab of its own (one local profile) and two tabs of
    headless chromium."""
    from playwright.sync_api import expect, sync_playwright

    from jupyter_tiers.config.profiles import load_config
    from jupyter_tiers.config.registry import Registry
    from jupyter_tiers.local.tier import LocalTier
    from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, UI_TIMEOUT_MS, _lab_process
    from tests.chaos import scenarios_lab

    tiers_yaml = f"profiles:\n  laptop:\n    tier: local\n    workdir: {workdir / 'work'}\n"
    with _lab_process(_dir(workdir / "lab"), tiers_yaml) as lab:
        os.environ["JUPYTER_TIERS_CONFIG"] = str(lab.server.config)
        tier = LocalTier(load_config().profile("laptop"), Registry(lab.server.registry))
        expect.set_options(timeout=UI_TIMEOUT_MS)
        pw = sync_playwright().start()
        try:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
            context = browser.new_context(viewport={"width": 1280, "height": 1000})
            context.set_default_timeout(UI_TIMEOUT_MS)
            return scenarios_lab.lab_restarts(lab, tier, [context.new_page(), context.new_page()],
                                              _dir(workdir / "gates"), seed=seed, restarts=restarts,
                                              progress=say)
        finally:
            pw.stop()
            for rec in tier.registry.list(limit=1000):
                tier.cancel(rec)
            tier.close()


def _on_small_disk(workdir: Path, say: Callable[[str], None]) -> Outcome:
    """The disk-full scenario on a 2 MiB tmpfs mounted for it (root), unmounted after."""
    disk = _dir(workdir / "disk")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(disk)],
                   check=True, capture_output=True, timeout=60)
    try:
        return scenarios_local.disk_full(disk, workdir / "registry.sqlite", progress=say)
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True, timeout=60, check=False)


def _clock(workdir: Path, say: Callable[[str], None], seed: int, steps: int) -> Outcome | None:
    """The clock-step scenario, or None (said why) where libfaketime or a compiler is missing."""
    try:
        return scenarios_clock.clock_steps(workdir, seed=seed, steps=steps, progress=say)
    except scenarios_clock.ClockStepUnavailable as e:
        say(f"(clock step skipped: {e})")
        return None


def _dir(path: Path) -> Path:
    path.mkdir()
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--full", action="store_true", help="the long run (default: the bounded one)")
    parser.add_argument("--seed", type=int, default=18, help="the fault schedule's seed")
    parser.add_argument("--only", default=",".join(GROUPS),
                        help="comma-separated groups to run: k8s, registry, local, ssh, lab-restart, "
                             "disk, slurm (ssh and slurm only when the Slurm test cluster runs, "
                             "lab-restart only with chromium, disk and slurm only as root)")
    args = parser.parse_args()
    size = FULL if args.full else BOUNDED
    groups = {g.strip() for g in args.only.split(",") if g.strip()}
    unknown = groups - set(GROUPS)
    if unknown:
        parser.error(f"--only: unknown group(s) {', '.join(sorted(unknown))}; use {', '.join(GROUPS)}")
    if "disk" in groups and os.geteuid() != 0:
        print("(disk skipped: mounting a small tmpfs needs root)", file=sys.stderr)
        groups.discard("disk")
    for group in ("ssh", "slurm"):
        if group in groups and not CLUSTER_ENV.exists():
            print(f"({group} skipped: no Slurm test cluster, {CLUSTER_ENV} missing)", file=sys.stderr)
            groups.discard(group)
    if "slurm" in groups and os.geteuid() != 0:
        print("(slurm skipped: stopping the cluster's daemons needs root)", file=sys.stderr)
        groups.discard("slurm")
    chromium = Path(os.environ.get("JT_CHROMIUM", "/usr/bin/chromium"))
    if "lab-restart" in groups and not chromium.exists():
        print(f"(lab-restart skipped: {chromium} missing)", file=sys.stderr)
        groups.discard("lab-restart")

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    outcomes: list[Outcome] = []
    notes: list[str] = []
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="jt-chaos-") as tmp:
        base = Path(tmp)
        os.environ["JUPYTER_TIERS_REGISTRY"] = str(base / "registry.sqlite")
        runs: list[tuple[str, str, Callable[[Path], Outcome | None]]] = [
            ("k8s", "API server restarts", lambda d: scenarios_k8s.run_on_fresh_emulator(
                d, lambda emu, ns: scenarios_k8s.api_server_restarts(
                    emu, ns, seed=args.seed, restarts=size["restarts"], progress=say))),
            ("k8s", "pod deletions", lambda d: scenarios_k8s.run_on_fresh_emulator(
                d, lambda emu, ns: scenarios_k8s.pod_deletions(
                    emu, ns, seed=args.seed, deletions=size["deletions"], progress=say))),
            ("k8s", "node evictions", lambda d: scenarios_k8s.run_on_fresh_emulator(
                d, lambda emu, ns: scenarios_k8s.node_evictions(
                    emu, ns, seed=args.seed, evictions=size["evictions"], progress=say))),
            ("k8s", "API outages > stale_after", lambda d: scenarios_k8s.run_on_fresh_emulator(
                d, lambda emu, ns: scenarios_k8s.api_down_longer_than_stale_after(
                    emu, ns, seed=args.seed, outages=size["outages"], progress=say))),
            ("registry", "concurrent registry", lambda d: scenarios_registry.concurrent(
                d, seed=args.seed, jobs=size["jobs"], services=size["services"],
                faults=size["registry_faults"], progress=say)),
            ("registry", "damaged registry", lambda d: scenarios_registry.damaged(
                d, seed=args.seed, progress=say)),
            ("ssh", "SSH cuts", lambda d: _ssh_run(d, say, lambda t, h, p: scenarios_ssh.log_stream_cuts(
                t, h, p, seed=args.seed, cuts=size["cuts"], lines=size["lines"], progress=say))),
            ("ssh", "SSH cuts mid-submit", lambda d: _ssh_run(
                d, say, lambda t, h, p: scenarios_ssh.submit_cuts(
                    t, h, p, seed=args.seed, submits=size["submits"], server_share=0.5,
                    progress=say))),
            ("ssh", "SSH cuts mid-download", lambda d: _ssh_run(
                d, say, lambda t, h, p: scenarios_ssh.download_cuts(
                    t, h, p, _dir(d / "dest"), seed=args.seed, cuts=size["download_cuts"],
                    megabytes=size["download_mb"], progress=say))),
            ("ssh", "SSH cuts mid --sync", lambda d: _ssh_run(
                d, say, lambda t, h, p: scenarios_ssh.sync_cuts(
                    t, h, p, _dir(d / "nb"), seed=args.seed, submits=size["sync_submits"],
                    progress=say))),
            ("local", "supervisor kills", lambda d: scenarios_local.supervisor_kills(
                d, seed=args.seed, kills=size["kills"], progress=say, notes=notes)),
            ("local", "kernel kills", lambda d: scenarios_local.kernel_kills(
                d, seed=args.seed, kills=size["kills"], progress=say)),
            ("local", "kernel kills mid-rollout", lambda d: scenarios_local.kernel_kills_mid_rollout(
                d, seed=args.seed, kills=size["kills"], progress=say)),
            ("local", "clock steps", lambda d: _clock(d, say, args.seed, size["clock_steps"])),
            ("lab-restart", "Jupyter server restarts", lambda d: _lab_restarts(
                d, say, seed=args.seed, restarts=size["lab_restarts"])),
            ("disk", "disk full", lambda d: _on_small_disk(d, say)),
            ("slurm", "slurmctld outages", lambda d: _ssh_run(
                d, say, lambda t, h, p: scenarios_slurm.ctld_outages(
                    t, seed=args.seed, outages=size["ctld_outages"], down_s=size["ctld_down_s"],
                    progress=say))),
            ("slurm", "slurmd kills", lambda d: _ssh_run(
                d, say, lambda t, h, p: scenarios_slurm.slurmd_kills(
                    t, seed=args.seed, kills=size["slurmd_kills"], progress=say))),
            ("slurm", "cluster disk full", lambda d: _ssh_run(
                d, say, lambda t, h, p: scenarios_slurm.cluster_disk_full(t, progress=say))),
            ("slurm", "slurmdbd outages", lambda d: _ssh_run(
                d, say, lambda t, h, p: scenarios_slurm.dbd_outages(
                    t, seed=args.seed, outages=size["dbd_outages"], progress=say))),
        ]
        for i, (group, label, run) in enumerate(runs):
            if group not in groups:
                continue
            say(f"{label} ...")
            workdir = base / f"s{i}"
            workdir.mkdir()
            outcome = run(workdir)
            if outcome is not None:
                outcomes.append(outcome)
    elapsed = time.monotonic() - started
    print(f"chaos run {'--full' if args.full else '(bounded)'} seed {args.seed}, "
          f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, "
          f"load {load_before:.1f} before / {os.getloadavg()[0]:.1f} after, {elapsed:.0f} s")
    print()
    print(table(outcomes))
    for o in outcomes:
        for problem in o.problems:
            print(f"- {o.scenario}: {problem}")
    for o in outcomes:
        for missed in o.missed:
            print(f"undelivered: {o.scenario}: {missed}")
    for note in notes:
        print(f"note: {note}")
    if not all(o.clean for o in outcomes):
        return 1
    return 3 if any(o.undelivered for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
