"""A Slurm cluster small enough to live in one test: the transport SlurmTier talks to.

``FakeSlurm`` has what SlurmTier uses of SSHTransport (``run``, ``stream``, ``connect``,
``close``; ``connected``, ``target`` and ``code_prompts`` for ``login``). The tier's remote
programs (the submit script, log reads, rank files, file listings, the checkpoint listing around
squeue) run unchanged with local bash, as they would on a login node; the scheduler's commands
are answered here the way Slurm 22.05 answers them:

- ``sbatch --parsable`` (called by the submit script) prints the next job id, and the job starts
  at once on the idle node (``job.sbatch`` run by bash in its own session, output to the job's
  ``--output`` file, with a one-node ``srun`` and ``scontrol``);
- each ``squeue`` is a scheduler tick: jobs whose batch script ended become COMPLETED or FAILED
  by its exit status, and what they left running is killed; squeue lists the jobs still pending
  or running (an ended job is purged at once, as if MinJobAge had passed, so its end comes from
  accounting);
- ``sacct`` answers the status query and the history query (``--delimiter``) from the same jobs;
- ``scancel`` cancels (a running job's session gets SIGTERM), and is silent with exit status 0
  for a job that already ended or that the cluster never had (as the test cluster's 22.05 is);
  ``squeue`` of ids it never had exits 1 with "Invalid job id specified", as that one does.

Nothing here is a real daemon: :meth:`close` kills every job's session.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from jupyter_tiers.batch.jobdir import LOG_NAME
from jupyter_tiers.slurm import commands
from jupyter_tiers.slurm.history import DELIMITER, HISTORY_FIELDS
from jupyter_tiers.slurm.parse import SACCT_FIELDS, SQUEUE_FORMAT
from jupyter_tiers.transport.exchange import CommandResult

NODE = "fake1"
USER = "tester"
_ANSWER_SH = 'printf %s "$1"; printf %s "$2" >&2; exit "$3"'  # stands in for squeue in a wrapper

# The commands a batch script and the tier's programs call on the cluster, on PATH for bash.
_BIN = {
    "sbatch": '#!/bin/sh\necho "$JT_FAKE_JOB_ID"\n',
    # One node: --ntasks-per-node copies of the command, each with its rank's Slurm variables.
    "srun": r"""#!/bin/bash
n=1
while [ "${1#--}" != "$1" ]; do
  case "$1" in --ntasks-per-node=*) n="${1#--ntasks-per-node=}";; esac
  shift
done
for ((i = 0; i < n; i++)); do
  SLURM_PROCID=$i SLURM_LOCALID=$i SLURM_NODEID=0 SLURM_NTASKS=$n "$@" &
done
rc=0
for job in $(jobs -p); do wait "$job" || rc=$?; done
exit "$rc"
""",
    # show hostnames / show node (the rendezvous lines), -o show job ID (output_tail's StdOut).
    "scontrol": r"""#!/bin/bash
case "$*" in
  "show hostnames"*) echo "NODE";;
  "show node"*) echo "NodeName=NODE NodeAddr=127.0.0.1 State=IDLE";;
  "-o show job "*) f="$JT_FAKE_STATE/${4:-none}.stdout"
    [ -f "$f" ] && echo "JobId=$4 StdOut=$(cat "$f")";;
esac
exit 0
""".replace("NODE", NODE),
}


class FakeStream:
    """A command run by local bash in its own session, read chunk by chunk; closing it ends the
    command (as closing an SSH channel ends ``tail -F`` on the login node)."""

    def __init__(self, argv: list[str], env: dict[str, str], stdin: bytes | None) -> None:
        self._proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, start_new_session=True)
        assert self._proc.stdin is not None and self._proc.stdout is not None
        with contextlib.suppress(BrokenPipeError):
            self._proc.stdin.write(stdin or b"")
        self._proc.stdin.close()
        self._out = self._proc.stdout

    def __iter__(self) -> Iterator[bytes]:
        while True:
            try:
                chunk = os.read(self._out.fileno(), 65536)
            except (OSError, ValueError):  # closed under us
                return
            if not chunk:
                return
            yield chunk

    def close(self) -> None:
        if self._proc.returncode is None:  # not reaped yet: its session's id is still ours
            _end_session(self._proc.pid)
            self._proc.wait()
        self._out.close()

    def __enter__(self) -> FakeStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class FakeJob:
    job_id: str
    name: str
    jobdir: str
    state: str = "PENDING"
    submit: float = 0.0
    start: float | None = None
    end: float | None = None
    exit_code: int = 0
    signal: int = 0
    proc: subprocess.Popen[bytes] | None = None


def _exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether ``proc`` has exited, leaving it unreaped (its pid, and so its session's id, stays
    ours until it is waited for: killing that session cannot reach anyone else's processes)."""
    if proc.returncode is not None:
        return True
    return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _end_session(pid: int) -> None:
    """Kill every process left in the session a job or stream was started in (``pid``: its
    leader, not yet reaped)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _stamp(t: float | None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t)) if t else "Unknown"


def _elapsed(job: FakeJob) -> str:
    if job.start is None:
        return "00:00:00"
    s = int((job.end or time.time()) - job.start)
    return f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"


class FakeSlurm:
    """The transport of a SlurmTier on a cluster of one node under ``root`` (see module doc)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.state_dir = root / "slurm-state"
        self.bin = root / "slurm-bin"
        for d in (self.state_dir, self.bin):
            d.mkdir(parents=True, exist_ok=True)
        for name, text in _BIN.items():
            (self.bin / name).write_text(text)
            (self.bin / name).chmod(0o755)
        self.jobs: dict[str, FakeJob] = {}
        self.calls: list[list[str]] = []
        self.connected = False
        self.target = f"{USER}@{NODE}"
        self.code_prompts = 0  # SSHTransport's count of one-time-code prompts (login's note)
        self._next_id = 100
        self._lock = threading.RLock()

    # --- the transport -------------------------------------------------------------------
    def _env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
        env.update(PATH=f"{self.bin}:{os.environ['PATH']}", HOME=str(self.root), USER=USER,
                   JT_FAKE_STATE=str(self.state_dir), **extra)
        return env

    def _bash(self, argv: Sequence[str], stdin: bytes | None, timeout: float | None,
              **env: str) -> CommandResult:
        p = subprocess.run(list(argv), input=stdin or b"", capture_output=True, env=self._env(**env),
                           timeout=timeout or 120, check=False)
        return CommandResult(tuple(argv), p.returncode, p.stdout, p.stderr)

    def run(self, argv: Sequence[str], *, stdin: bytes | None = None, timeout: float | None = 60.0,
            check: bool = True) -> CommandResult:
        argv = list(argv)
        self.connected = True
        with self._lock:
            self.calls.append(argv)
            if argv[: len(commands.BASH)] == commands.BASH and argv[4] == commands.SUBMIT_SH:
                return self._submit(argv, stdin, timeout)
            if argv[: len(commands.BASH)] == commands.BASH and argv[4] == commands.WITH_CHECKPOINTS_SH:
                n = int(argv[6])
                code, out, err = self._answer(commands.unwrap_slurm(argv[7 + n:]))
                wrapped = [*argv[: 7 + n], "bash", "-c", _ANSWER_SH, "squeue", out, err, str(code)]
                return self._bash(wrapped, stdin, timeout)
            inner = commands.unwrap_slurm(argv)  # the tier's commands run in a neutral environment
            if inner[0] in ("squeue", "sacct", "scancel"):
                code, out, err = self._answer(inner)
                return CommandResult(tuple(argv), code, out.encode(), err.encode())
        return self._bash(argv, stdin, timeout)

    def stream(self, argv: Sequence[str], *, timeout: float | None = None,
               stdin: bytes | None = None) -> FakeStream:
        """A long-running command's output as it comes (a followed log), as SSHTransport's."""
        self.connected = True
        with self._lock:
            self.calls.append(list(argv))
        return FakeStream(list(argv), self._env(), stdin)

    def connect(self) -> None:
        self.connected = True

    def close(self) -> None:
        """Stop every job still running (its whole session)."""
        with self._lock:
            for job in self.jobs.values():
                if job.proc is not None and job.proc.returncode is None:  # not reaped: its pid is ours
                    _end_session(job.proc.pid)
                    job.proc.wait()

    # --- sbatch --------------------------------------------------------------------------
    def _submit(self, argv: list[str], stdin: bytes | None, timeout: float | None) -> CommandResult:
        job_id = str(self._next_id)
        result = self._bash(argv, stdin, timeout, JT_FAKE_JOB_ID=job_id)
        lines = result.stdout.decode().split()
        if result.exit_status == 0 and lines and lines[0] == job_id:
            self._next_id += 1
            script = Path(lines[-1], "job.sbatch").read_text()
            name = next(ln.split("=", 1)[1] for ln in script.splitlines()
                        if ln.startswith("#SBATCH --job-name="))
            job = self.jobs[job_id] = FakeJob(job_id, name, lines[-1], submit=time.time())
            self._start(job)  # an idle cluster: it starts at once
        return result

    # --- the scheduler -------------------------------------------------------------------
    def _tick(self) -> None:
        """Record the end of batch scripts that ended."""
        for job in self.jobs.values():
            if job.state == "RUNNING" and job.proc is not None and _exited(job.proc):
                _end_session(job.proc.pid)  # as slurmstepd ends what the job left behind
                code = job.proc.wait()
                job.state, job.end = ("COMPLETED" if code == 0 else "FAILED"), time.time()
                job.exit_code, job.signal = (code, 0) if code >= 0 else (0, -code)

    def _start(self, job: FakeJob) -> None:
        env = self._env(SLURM_JOB_ID=job.job_id, SLURM_SUBMIT_DIR=job.jobdir, SLURM_JOB_NAME=job.name,
                        SLURM_JOB_NODELIST=NODE, SLURM_JOB_NUM_NODES="1", SLURMD_NODENAME=NODE,
                        JT_HEARTBEAT="1")
        log = Path(job.jobdir, LOG_NAME)
        (self.state_dir / f"{job.job_id}.stdout").write_text(str(log))
        with open(log, "ab") as out:
            job.proc = subprocess.Popen(["bash", "job.sbatch"], cwd=job.jobdir, env=env,
                                        stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        job.state, job.start = "RUNNING", time.time()

    def _known(self, ids: str) -> list[FakeJob]:
        return [self.jobs[i] for i in ids.split(",") if i in self.jobs]

    def _answer(self, argv: list[str]) -> tuple[int, str, str]:
        """(exit status, stdout, stderr) of squeue, sacct or scancel."""
        if argv[0] == "scancel":
            return self._scancel(argv[-1])
        if argv[0] == "squeue":
            assert argv[argv.index("-o") + 1] == SQUEUE_FORMAT
            self._tick()
            ids = argv[argv.index("-j") + 1]
            if not self._known(ids):
                return 1, "", "slurm_load_jobs error: Invalid job id specified\n"
            rows = [f"{j.job_id}|{j.state}|{'Priority' if j.state == 'PENDING' else 'None'}|"
                    f"{_stamp(j.start) if j.start else 'N/A'}|{_elapsed(j)}|"
                    f"{NODE if j.start else ''}|{j.name}|1"
                    for j in self._known(ids) if j.state in ("PENDING", "RUNNING")]
            return 0, "".join(r + "\n" for r in rows), ""
        if any(a.startswith("--delimiter=") for a in argv):
            return 0, self._history(argv), ""
        assert argv[argv.index("-o") + 1] == SACCT_FIELDS
        rows = [f"{j.job_id}|{self._acct_state(j)}|{j.exit_code}:{j.signal}|{_elapsed(j)}|"
                f"{NODE if j.start else 'None assigned'}|None|{_stamp(j.start)}|{_stamp(j.end)}|{j.name}"
                for j in self._known(argv[argv.index("-j") + 1])]
        return 0, "".join(r + "\n" for r in rows), ""

    @staticmethod
    def _acct_state(job: FakeJob) -> str:
        return "CANCELLED by 1000" if job.state == "CANCELLED" else job.state

    def _history(self, argv: list[str]) -> str:
        assert argv[argv.index("-o") + 1] == ",".join(HISTORY_FIELDS)
        jobs = self._known(argv[argv.index("-j") + 1]) if "-j" in argv else list(self.jobs.values())
        rows = []
        for j in jobs:
            values = [j.job_id, j.job_id, self._acct_state(j), f"{j.exit_code}:{j.signal}", _elapsed(j), "1",
                      NODE, "", USER, _stamp(j.submit), _stamp(j.start), _stamp(j.end), "debug",
                      str(Path(j.jobdir)), j.name]
            rows.append(DELIMITER.join(values))
        return "".join(r + "\n" for r in rows)

    def _scancel(self, job_id: str) -> tuple[int, str, str]:
        job = self.jobs.get(job_id)
        if job is None:
            return 0, "", ""  # 22.05 (the test cluster's): silent, exit 0, unless asked to be verbose
        if job.state == "PENDING":
            job.state, job.end = "CANCELLED", time.time()
        elif job.state == "RUNNING":
            if job.proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(job.proc.pid, signal.SIGTERM)
            job.state, job.end, job.signal = "CANCELLED", time.time(), 15
        return 0, "", ""  # Slurm 22.05: an ended job is silently nothing to do
