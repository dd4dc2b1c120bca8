"""The supervisor of one local job: ``python -m jupyter_tiers.local.supervisor [--detach] JOBDIR``.

It plays Slurm's part for a job of the local tier. The tier writes the job directory (``job.json``
with the launch plan, ``job.sh``, ``main.py``/``main.sh``, ``rank.sh``, ``env.sh``) and starts this
module detached from the kernel (own session, stdio to ``supervisor.log``; with ``--detach`` it
forks once more so the job is re-parented away from the kernel and survives a kernel restart).
Then, like ``sbatch`` + ``srun --kill-on-bad-exit``:

1. The batch step: ``job.sh`` runs once in bash (it sources ``env.sh`` and the profile's setup
   lines); its output goes to ``job.log`` without a rank prefix, and the environment it ends with
   is what every rank gets (setup runs once per job, as in a Slurm batch script).
2. ``nodes * ranks_per_node`` ranks, each ``bash rank.sh PROGRAM`` (the shim of the Slurm tier)
   in its own process group, all writing to ``job.log`` opened with O_APPEND (the shim's prefixer
   writes whole lines), with the environment a Slurm task sees. ``--nodes`` is emulated: ranks
   are grouped into nodes named ``local0``, ``local1``... (``SLURM_JOB_NODELIST=local[0-1]``).
3. Fail-stop: the first rank to exit non-zero makes the supervisor SIGTERM every other rank's
   process group, wait ``KILL_WAIT`` seconds (Slurm's KillWait) and SIGKILL what is left: FAILED.
   SIGTERM/SIGINT/SIGHUP to the supervisor (or a ``cancel`` file) stops the job the same way:
   CANCELLED. A ``--time`` limit does too: TIMEOUT. All ranks exit 0: COMPLETED.
4. At the end every process still carrying ``JT_JOB_DIR=<this job>`` in its environment is
   killed (the local stand-in for Slurm's cgroup cleanup), then the final ``state.json`` is
   written, so a terminal state means no process of the job is left. On Linux the supervisor is
   a child subreaper, so the job's orphaned processes are reaped by it, not left to init, and
   every process still below it is killed too: a daemon that left its session and cleared its
   environment is found that way. Limit: if the supervisor itself is SIGKILLed, such a daemon
   is re-parented away and only the environment scan of ``recover_lost`` looks for it.
5. A supervisor killed without recording the end (SIGKILL, the OOM killer): its lifeline
   (lifeline.py, a process forked at start) notices at once, stops the job's processes and
   records FAILED naming the supervisor; the job does not run on unwatched.

``state.json`` is only ever replaced atomically (write a temporary file, then rename).

Launcher ``torchrun``: the supervisor does not run torchrun. It sets, per rank, the environment
torchrun would give its workers (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
ROLE_RANK, MASTER_ADDR/MASTER_PORT, TORCHELASTIC_*), which is all ``init_process_group`` with
``env://`` needs, and keeps the Slurm view torchrun-under-srun has (one task per node). Running
torchrun itself would add an elastic agent per node that only restarts ranks (this tier's
fail-stop is the supervisor's) and needs torch installed for the shell jobs too. With ``srun``
the same torch variables are set as well, so ``env://`` works with either launcher.

The /proc helpers are in processes.py, the job directory's files and state.json in
jobstate.py, the Slurm environment and node names in slurmenv.py.

This module imports only the standard library and small pure modules, to start fast.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..batch.jobdir import LOG_NAME, RANKS_DIR
from . import lifeline
from .jobstate import (
    CANCEL_FILE,
    ENV_DUMP,
    PID_FILE,
    PLAN_FILE,
    boot_id,
    boottime,
    end_stamp,
    read_state,
    write_state,
)
from .processes import (
    KILL_WAIT,
    become_subreaper,
    descendants,
    detach,
    kill_job_processes,
    kill_until_gone,
    proc_start_time,
    reap_zombies,
    supervisor_argv,
    zombie_children,
)
from .slurmenv import MASTER_ADDR, clean_env, free_port, node_names, nodelist
from .wakeup import Wakeup

BATCH = -1  # key of the batch step among the supervised processes

# The batch step: source job.sh, then hand the final environment and directory to the supervisor.
BATCH_RUNNER = """jt_py=$1 jt_code=$2 jt_out=$3; set --
source "$JT_JOB_DIR/job.sh"
exec "$jt_py" -I -c "$jt_code" "$jt_out"
"""
DUMP_ENV_PY = (
    "import json, os, sys\n"
    "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)\n"
    "with os.fdopen(fd, 'w') as f:\n"
    "    json.dump({'env': dict(os.environ), 'cwd': os.getcwd()}, f)\n"
)


# --- the supervisor -----------------------------------------------------------------------------


@dataclass
class Outcome:
    state: str
    exit_code: int | None = None
    exit_signal: int | None = None
    reason: str | None = None
    failed_rank: int | None = None


def _returncode(rc: int) -> tuple[int | None, int | None]:
    """Popen returncode -> (exit code, signal) as Slurm reports them."""
    return (rc, None) if rc >= 0 else (None, -rc)


class Supervisor:
    """Runs one job directory to its end; see the module docstring."""

    def __init__(self, jobdir: Path) -> None:
        self.jobdir = jobdir
        self.plan: dict[str, Any] = json.loads((jobdir / PLAN_FILE).read_text(encoding="utf-8"))
        self.state: dict[str, Any] = read_state(jobdir) or {"job_id": self.plan["job_id"]}
        self.log_fd = -1
        self.signalled: int | None = None
        self.names = node_names(int(self.plan["nodes"]))
        self._wakeup = Wakeup()
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self._subreaper = False
        self._lifeline = -1  # the write end of the lifeline's pipe (lifeline.py), kept until exit

    # --- signals and waiting ---------------------------------------------------------------
    def _on_signal(self, signum: int, frame: object) -> None:
        if self.signalled is None:
            self.signalled = signum

    def _wait(self, timeout: float) -> None:
        if self._wakeup.wait(timeout) and self._subreaper:
            self._reap_strays()

    def _reap_strays(self) -> None:
        """Reap adopted orphans of the job (never a rank or step whose Popen still waits)."""
        reap_zombies({p.pid for p in self._procs.values() if p.returncode is None})

    def _kill_descendants(self, rounds: int = 100) -> None:
        """SIGKILL every process left below the supervisor. As a child subreaper it inherits
        the job's orphans, so this also finds a daemon that left its session and cleared its
        environment (which the JT_JOB_DIR scan cannot see)."""
        me = os.getpid()

        def pause() -> None:
            time.sleep(0.02)
            self._reap_strays()

        kill_until_gone(lambda: descendants(me), pause, rounds)

    def _cancel_requested(self) -> bool:
        return self.signalled is not None or (self.jobdir / CANCEL_FILE).exists()

    # --- output ------------------------------------------------------------------------------
    def _say(self, text: str) -> None:
        """One unprefixed line in job.log (like slurmstepd's and srun's own messages)."""
        if self.log_fd >= 0:
            with contextlib.suppress(OSError):
                os.write(self.log_fd, f"jupyter-tiers: {text}\n".encode())

    def _save(self) -> None:
        self.state["updated_at"] = time.time()
        write_state(self.jobdir, self.state)

    # --- environment -------------------------------------------------------------------------
    def _job_env(self) -> dict[str, str]:
        plan = self.plan
        nodes, per_node = int(plan["nodes"]), int(plan["ranks_per_node"])
        torchrun = plan["launcher"] == "torchrun"
        tasks_per_node = 1 if torchrun else per_node
        env = clean_env(os.environ)
        # The kernel's interpreter directory goes first on PATH, so "python3" is the kernel's
        # environment's python even where another one comes earlier on the inherited PATH, as
        # if that environment were activated; setup lines may still change it.
        bindir = os.path.dirname(sys.executable)
        rest = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p and p != bindir]
        if bindir:
            env["PATH"] = os.pathsep.join([bindir, *rest])
        job_id = str(plan["job_id"])
        env.update(
            JT_JOB_DIR=str(self.jobdir),
            JT_WORLD_SIZE=str(nodes * per_node),
            PYTHONUNBUFFERED="1",
            SLURM_JOB_ID=job_id,
            SLURM_JOBID=job_id,
            SLURM_JOB_NAME=str(plan["name"]),
            SLURM_SUBMIT_DIR=str(self.jobdir),
            SLURM_SUBMIT_HOST=socket.gethostname(),
            SLURM_CLUSTER_NAME="local",
            SLURM_JOB_NODELIST=nodelist(nodes),
            SLURM_NODELIST=nodelist(nodes),
            SLURM_JOB_NUM_NODES=str(nodes),
            SLURM_NNODES=str(nodes),
            SLURM_NTASKS=str(nodes * tasks_per_node),
            SLURM_NPROCS=str(nodes * tasks_per_node),
            SLURM_NTASKS_PER_NODE=str(tasks_per_node),
            SLURM_TASKS_PER_NODE=f"{tasks_per_node}(x{nodes})" if nodes > 1 else str(tasks_per_node),
            MASTER_ADDR=MASTER_ADDR,
            MASTER_PORT=str(self.state["master_port"]),
        )
        if plan.get("cpus_per_task"):
            env["SLURM_CPUS_PER_TASK"] = str(plan["cpus_per_task"])
        return env

    def _rank_env(self, base: Mapping[str, str], node: int, local: int) -> dict[str, str]:
        plan = self.plan
        nodes, per_node = int(plan["nodes"]), int(plan["ranks_per_node"])
        rank = node * per_node + local
        env = dict(base)
        torchrun = plan["launcher"] == "torchrun"
        env.update(
            # torchrun under srun is one Slurm task per node; srun alone is one task per rank.
            SLURM_PROCID=str(node if torchrun else rank),
            SLURM_LOCALID=str(0 if torchrun else local),
            SLURM_NODEID=str(node),
            SLURMD_NODENAME=self.names[node],
            SLURM_STEP_ID="0",
            SLURM_STEPID="0",
            RANK=str(rank),
            LOCAL_RANK=str(local),
            WORLD_SIZE=str(nodes * per_node),
            LOCAL_WORLD_SIZE=str(per_node),
        )
        if torchrun:
            env.update(
                GROUP_RANK=str(node),
                GROUP_WORLD_SIZE=str(nodes),
                ROLE_NAME="default",
                ROLE_RANK=str(rank),
                ROLE_WORLD_SIZE=str(nodes * per_node),
                TORCHELASTIC_RUN_ID=str(plan["job_id"]),
                TORCHELASTIC_RESTART_COUNT="0",
                TORCHELASTIC_MAX_RESTARTS="0",
            )
            env.setdefault("OMP_NUM_THREADS", "1")  # what torchrun sets when unset
        return env

    # --- processes ---------------------------------------------------------------------------
    def _spawn(self, argv: list[str], env: Mapping[str, str], cwd: Path | str) -> subprocess.Popen[bytes]:
        group: dict[str, Any] = (
            {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
        )
        return subprocess.Popen(
            argv,
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=self.log_fd,
            stderr=self.log_fd,
            close_fds=True,
            **group,
        )

    @staticmethod
    def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
        """Signal the process group of a not yet reaped leader (its pid cannot be reused)."""
        if proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
            if sig == signal.SIGTERM:
                os.killpg(proc.pid, signal.SIGCONT)

    def _describe(self, key: int) -> str:
        if key == BATCH:
            return "the batch step (job.sh)"
        per_node = int(self.plan["ranks_per_node"])
        return f"rank {key} ({self.names[key // per_node]})"

    def _supervise(self, procs: dict[int, subprocess.Popen[bytes]]) -> Outcome:
        """Wait for every process; fail-stop, cancel and time limit as in the module docstring."""
        live = dict(procs)
        outcome: Outcome | None = None
        kill_at: float | None = None
        limit = self.plan.get("time_limit_s")
        # The time limit on CLOCK_BOOTTIME: a wall clock stepped +1 h is not an hour of running.
        started = float(self.state.get("start_boot") or boottime())
        while live:
            for key, proc in sorted(live.items()):
                rc = proc.poll()
                if rc is None:
                    continue
                del live[key]
                if rc != 0 and outcome is None:
                    code, sig = _returncode(rc)
                    how = f"exited with code {code}" if code is not None else f"was killed by signal {sig}"
                    others = "stopping the other ranks" if key != BATCH else "no rank was started"
                    self._say(f"{self._describe(key)} {how}: {others}")
                    outcome = Outcome("FAILED", exit_code=code, exit_signal=sig,
                                      reason="NonZeroExitCode", failed_rank=None if key == BATCH else key)
                    kill_at = self._stop(live)
            if outcome is None and self._cancel_requested():
                outcome = Outcome("CANCELLED", exit_code=0, exit_signal=signal.SIGTERM)
                self._say(f"job {self.plan['job_id']} CANCELLED at {_iso(time.time())}: stopping every rank")
                kill_at = self._stop(live)
            if outcome is None and limit and boottime() - started >= float(limit):
                outcome = Outcome("TIMEOUT", exit_code=0, exit_signal=signal.SIGTERM, reason="TimeLimit")
                self._say(f"job {self.plan['job_id']} reached its time limit: stopping every rank")
                kill_at = self._stop(live)
            if not live:
                break
            if kill_at is not None and time.monotonic() >= kill_at:
                for proc in live.values():
                    self._signal_group(proc, signal.SIGKILL)
                kill_at = time.monotonic() + KILL_WAIT  # again later, should a group survive
            timeout = 1.0
            if kill_at is not None:
                timeout = min(timeout, kill_at - time.monotonic())
            if outcome is None and limit:
                timeout = min(timeout, started + float(limit) - boottime())
            self._wait(timeout)
        return outcome or Outcome("COMPLETED", exit_code=0)

    def _stop(self, live: Mapping[int, subprocess.Popen[bytes]]) -> float:
        for proc in live.values():
            self._signal_group(proc, signal.SIGTERM)
        return time.monotonic() + KILL_WAIT

    # --- the job -----------------------------------------------------------------------------
    def _batch_step(self, env: dict[str, str]) -> tuple[Outcome | None, dict[str, str], str]:
        """Run job.sh once; returns (outcome if the job ends here, rank env, rank cwd)."""
        dump = self.jobdir / ENV_DUMP
        with contextlib.suppress(FileNotFoundError):
            dump.unlink()
        argv = ["bash", "-c", BATCH_RUNNER, "jt-batch", sys.executable, DUMP_ENV_PY, str(dump)]
        proc = self._spawn(argv, env, self.jobdir)
        self._procs[BATCH] = proc
        outcome = self._supervise({BATCH: proc})
        if outcome.state != "COMPLETED":
            return outcome, env, str(self.jobdir)
        try:
            data = json.loads(dump.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return Outcome("COMPLETED", exit_code=0, reason="job.sh ended before the ranks started"), env, ""
        finally:
            with contextlib.suppress(FileNotFoundError):
                dump.unlink()
        rank_env = {str(k): str(v) for k, v in data.get("env", {}).items()}
        for key in ("_", "SHLVL", "OLDPWD"):
            rank_env.pop(key, None)
        cwd = str(data.get("cwd") or self.jobdir)
        if not os.path.isdir(cwd):
            cwd = str(self.jobdir)
        rank_env["PWD"] = cwd
        return None, rank_env, cwd

    def _ranks(self, env: Mapping[str, str], cwd: str) -> Outcome:
        nodes, per_node = int(self.plan["nodes"]), int(self.plan["ranks_per_node"])
        program = [str(a) for a in self.plan["program"]]
        rank_sh = str(self.jobdir / "rank.sh")
        procs: dict[int, subprocess.Popen[bytes]] = {}
        for node in range(nodes):
            for local in range(per_node):
                if self._cancel_requested():
                    break
                rank = node * per_node + local
                try:
                    env_r = self._rank_env(env, node, local)
                    procs[rank] = self._spawn(["bash", rank_sh, *program], env_r, cwd)
                except OSError as exc:
                    self._say(f"cannot start rank {rank}: {exc}")
                    for proc in procs.values():
                        self._signal_group(proc, signal.SIGKILL)
                    self._supervise(procs)
                    return Outcome("FAILED", exit_code=1, reason=f"cannot start rank {rank}: {exc}")
                self._procs[rank] = procs[rank]
        self.state["rank_pids"] = {str(r): p.pid for r, p in procs.items()}
        self._save()
        if not procs:
            # Cancelled between the batch step and the first rank: nothing to supervise, and
            # an empty supervision would report COMPLETED.
            self._say(f"job {self.plan['job_id']} CANCELLED at {_iso(time.time())}: before any rank started")
            return Outcome("CANCELLED", exit_code=0, exit_signal=signal.SIGTERM)
        return self._supervise(procs)

    def run(self) -> int:
        self._wakeup.install(self._on_signal)
        self._subreaper = become_subreaper()
        with contextlib.suppress(OSError):  # without it, the job is stopped when next looked at
            self._lifeline = lifeline.start(self.jobdir)
        os.chdir(self.jobdir)
        self.log_fd = os.open(self.jobdir / LOG_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        (self.jobdir / RANKS_DIR).mkdir(exist_ok=True)
        outcome: Outcome | None = None
        try:
            nodes = int(self.plan["nodes"])
            self.state.update(
                pid=os.getpid(),
                pid_start=proc_start_time(os.getpid()),
                nodes=self.names,
                nodelist=nodelist(nodes),
                master_port=int(self.plan.get("rdzv_port") or free_port()),
            )
            if self._cancel_requested():
                outcome = Outcome("CANCELLED", exit_code=0, exit_signal=signal.SIGTERM)
            else:
                self.state.update(state="RUNNING", start_time=time.time(), start_boot=boottime(),
                                  boot_id=boot_id(), reason=None)
                self._save()
                outcome, env, cwd = self._batch_step(self._job_env())
                if outcome is None:
                    outcome = self._ranks(env, cwd)
        except BaseException as exc:  # record the end whatever happened
            traceback.print_exc()
            outcome = Outcome("FAILED", exit_code=1, reason=f"local supervisor error: {exc!r}")
            self._say(f"supervisor error: {exc!r}")
        finally:
            self._finish(outcome or Outcome("FAILED", exit_code=1, reason="local supervisor error"))
        return 0

    def _finish(self, outcome: Outcome) -> None:
        for proc in self._procs.values():
            self._signal_group(proc, signal.SIGKILL)
        for proc in self._procs.values():
            with contextlib.suppress(Exception):
                proc.wait(timeout=30)
        kill_job_processes(self.jobdir)
        if self._subreaper:
            self._kill_descendants()
        for _ in range(10):  # processes killed just now become zombies in a moment
            if not self._subreaper or not zombie_children():
                break
            self._reap_strays()
            time.sleep(0.02)
        self.state.update(
            state=outcome.state,
            exit_code=outcome.exit_code,
            exit_signal=outcome.exit_signal,
            reason=outcome.reason,
            failed_rank=outcome.failed_rank,
            **end_stamp(self.state),
        )
        self._save()
        if self.log_fd >= 0:
            os.close(self.log_fd)
            self.log_fd = -1


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ts))


def main(argv: list[str] | None = None) -> int:
    jobdir, detached = supervisor_argv("jupyter_tiers.local.supervisor", "jobdir", argv)
    # As on Slurm: the job's files are private; rank.sh gives the ranks umask 027 (checkpoints).
    os.umask(0o077)
    if detached:
        detach([jobdir], PID_FILE)
    return Supervisor(jobdir).run()


if __name__ == "__main__":
    sys.exit(main())
