"""LocalTier: ranks as local processes, with the environment and fail-stop of a Slurm job.

Every job is a directory under the profile's ``workdir`` (default ``<jupyter data dir>/tiers/
local-jobs``) named ``<id>-<name>``; job ids are integers from a counter file under a lock, so
``%tiers attach 12`` works. The job runs under its own supervisor process (supervisor.py), which
is detached from the kernel: a job survives a kernel restart and any new LocalTier with the same
registry can attach to it. Everything the tier knows comes from the job directory:

- ``state.json``: the supervisor's view (state, times, exit code, nodes), replaced atomically;
- ``ranks/<rank>``: the rank shim's start/exit/signal events (as on Slurm);
- ``job.log``: every rank's output, prefixed ``"R: "`` by the shim.

Nothing here runs a subprocess after submit: status and logs are plain file reads.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import signal
import stat
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..batch.arrays import (
    PARAMS_FILE,
    TASKS_DIR,
    counts_detail,
    params_json,
    plan_of,
    task_files,
    task_index,
    task_records,
)
from ..batch.jobdir import (
    LOG_NAME,
    RANKS_DIR,
    checkpoint_lines,
    default_checkpoint_dir,
    expected_checkpoint_dir,
    job_files,
)
from ..batch.logs import ByteStream, split_log_line
from ..batch.usage import USAGE_MAX_SAMPLES, UsageSeries
from ..config.profiles import LOCAL_SERVE_DEFAULTS, Profile
from ..config.registry import JobRecord, Registry, spec_for_record
from ..core.errors import SpecError, SubmitError
from ..core.model import JobSpec, JobState, LogLine, RankState, SchedulerInfo
from ..data.files import FileInfo, file_sha256, list_local, local_chunks, remote_path
from ..data.handoff import attach_checkpoints, decode_detail, encode_detail
from ..data.sync import copy_tree, notebook_manifest, shell_lines
from ..engine.handles import Job
from ..engine.tier import BatchTier
from ..spec.jobspec import validate_spec
from . import jobstate, processes, slurmenv
from .array_supervisor import ARRAY_FILE
from .jobread import (
    newest_checkpoint,
    read_last_lines,
    read_ranks,
    read_stacks_text,
    read_usage_series,
    tail_text,
    write_stacks_request,
)

MAX_RANKS = 1024  # a local job's ranks all run on this machine
LAUNCH_TIMEOUT = 60.0
FOLLOW_INTERVAL = 0.02
LOG_CHUNK = 1 << 20  # bytes read at a time when a whole log is printed or scanned
_COUNTER = ".last-job-id"
_COUNTER_LOCK = ".last-job-id.lock"
# Fields of a JobSpec that have no local meaning; the plan says so instead of silently dropping them.
_NOT_APPLIED = (
    "gpus_per_node", "mem", "partition", "account", "qos", "constraint", "switches", "signal",
)


def default_workdir() -> Path:
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / "tiers" / "local-jobs"


def local_workdir(profile: Profile) -> Path:
    """The profile's ``workdir`` (expanded, absolute), else the default under the Jupyter data dir."""
    configured = profile.get("workdir")
    if configured:
        return Path(os.path.expandvars(str(configured))).expanduser().absolute()
    return default_workdir()


def _open_private(path: Path, flags: int) -> int:
    """os.open without following a symlink; new files are 0600."""
    return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


def check_private_dir(path: Path, what: str = "the local workdir") -> None:
    """``path`` itself (``lstat``: a symlink is refused, never followed) is a directory of the
    user's own that group and others cannot write: jobs, services, the counter and env.sh live
    there, and another user's files (a planted symlink, their own directory) must not be
    written through."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise SubmitError(f"{what} {path} is a symlink; use a real directory of your own (the "
                          "link's target is not checked or followed)")
    if not stat.S_ISDIR(info.st_mode):
        raise SubmitError(f"{what} {path} is not a directory")
    if info.st_uid != os.getuid():
        raise SubmitError(f"{what} {path} belongs to uid {info.st_uid}, not to you; "
                          "set the profile's workdir to a directory of your own")
    if info.st_mode & 0o022:
        raise SubmitError(f"{what} {path} is writable by group or others (mode "
                          f"{info.st_mode & 0o777:o}); chmod go-w it or use a private directory")


def check_workdir_owner(workdir: Path) -> None:
    """The local workdir must be the user's own real directory, closed to others."""
    check_private_dir(workdir, "the local workdir")


def _program(spec: JobSpec, jobdir: Path | str) -> list[str]:
    if spec.shell:
        return ["bash", f"{jobdir}/main.sh"]
    # No shell runs the rank's argv: expand a leading "~/" here (as the Slurm script does).
    return [os.path.expanduser(spec.python), f"{jobdir}/main.py"]


def check_local(spec: JobSpec) -> None:
    """validate_spec plus the local limits."""
    validate_spec(spec)
    if spec.world_size > MAX_RANKS:
        raise SpecError(
            "nodes", f"{spec.nodes} x {spec.ranks_per_node} = {spec.world_size} ranks; a local job"
            f" runs at most {MAX_RANKS} ranks on this machine"
        )
    if spec.rdzv_port is not None and spec.rdzv_port < 1024:
        raise SpecError("rdzv_port", f"use a port from 1024 to 65535 locally, got {spec.rdzv_port}")


def render_batch(spec: JobSpec) -> str:
    """job.sh: the plan as comments, then the batch step (env.sh, setup). No env values."""
    check_local(spec)
    torchrun = spec.launcher == "torchrun"
    program = " ".join(
        ["bash", '"$JT_JOB_DIR/main.sh"'] if spec.shell else [spec.python, '"$JT_JOB_DIR/main.py"']
    )
    rank_names = list(slurmenv.RANK_ENV_NAMES) + (list(slurmenv.TORCHRUN_ENV_NAMES) if torchrun else [])
    job_names = [n for n in slurmenv.JOB_ENV_NAMES if n not in ("MASTER_ADDR", "MASTER_PORT")]
    if not spec.cpus_per_task:
        job_names.remove("SLURM_CPUS_PER_TASK")
    port = str(spec.rdzv_port) if spec.rdzv_port else "<a free port>"
    s = "s" if spec.nodes != 1 else ""
    lines = [
        "#!/bin/bash",
        f"# jupyter-tiers local job {spec.name!r}: {spec.nodes} emulated node{s}"
        f" ({slurmenv.nodelist(spec.nodes)}) x {spec.ranks_per_node} ranks = {spec.world_size}"
        f" rank{'s' if spec.world_size != 1 else ''}, launcher {spec.launcher}.",
        "#",
        "# The local supervisor runs this file once, in the job directory, as the batch step; its",
        "# output goes to job.log without a rank prefix. Then it starts every rank as",
        "#",
        f"#   bash rank.sh {program}",
        "#",
        "# in its own process group, with the environment this step ends with, plus for the job:",
        *_wrap_names(job_names),
        f"#   MASTER_ADDR={slurmenv.MASTER_ADDR} MASTER_PORT={port}",
        "# and per rank" + (" (as torchrun sets them; torchrun itself is not run):" if torchrun else ":"),
        *_wrap_names(rank_names),
        f"# Fail-stop: the first rank to exit non-zero stops the others (SIGTERM, then SIGKILL after"
        f" {processes.KILL_WAIT:g} s).",
    ]
    limit = slurmenv.parse_time_limit(spec.time)
    if limit:
        lines.append(f"# Time limit: {spec.time} (then SIGTERM, SIGKILL, state TIMEOUT).")
    ignored = [f"{f}={getattr(spec, f)}" for f in _NOT_APPLIED if getattr(spec, f) is not None]
    ignored += [f"{f}=true" for f in ("exclusive", "requeue") if getattr(spec, f)]
    ignored += list(spec.sbatch_options)
    if ignored:
        lines.append("# Not applied locally: " + ", ".join(ignored))
    lines += ["", "# Checkpoints go here; the notebook records the newest when the job ends.",
              *checkpoint_lines(spec)]
    if spec.env:
        lines += [
            f"# env (values in env.sh, not shown): {', '.join(k for k, _ in spec.env)}",
            "",
            'source "$JT_JOB_DIR/env.sh"',
        ]
    if spec.setup:
        lines += ["", "# setup from the profile", *spec.setup]
    return "\n".join(lines) + "\n"


SYNC_DIR = "code"  # --sync: the copy of the notebook's files in the job (or array) directory


def _sync_lines(spec: JobSpec, tree: str) -> str:
    """job.sh's last lines with --sync: the ranks start in the copy, which is on PYTHONPATH."""
    if not spec.sync:
        return ""
    return "\n".join(["", *shell_lines(tree)]) + "\n"


def _wrap_names(names: Sequence[str], width: int = 96) -> list[str]:
    out: list[str] = []
    line = "#  "
    for name in names:
        if len(line) + len(name) + 1 > width:
            out.append(line)
            line = "#  "
        line += " " + name
    out.append(line)
    return out


class FileFollower:
    """A ByteStream over a growing local file from a byte offset; close() stops it promptly."""

    def __init__(self, path: Path, offset: int, interval: float = FOLLOW_INTERVAL) -> None:
        self.path = path
        self.offset = offset
        self.interval = interval
        self._closed = threading.Event()

    def __iter__(self) -> Iterator[bytes]:
        f = None
        try:
            while not self._closed.is_set():
                if f is None:
                    try:
                        f = open(self.path, "rb", buffering=0)  # noqa: SIM115 (closed below)
                    except FileNotFoundError:
                        self._closed.wait(self.interval)
                        continue
                    f.seek(self.offset)
                data = f.read(1 << 16)
                if data:
                    self.offset += len(data)
                    yield data
                else:
                    self._closed.wait(self.interval)
        finally:
            if f is not None:
                f.close()

    def close(self) -> None:
        self._closed.set()


class LocalTier(BatchTier):
    """Jobs as local processes; one watcher for all of them. See the module docstring."""

    backend = "local"

    def profile_defaults(self) -> Mapping[str, Any]:
        # A local profile's defaults may carry serving keys too (config.LOCAL_SERVE_DEFAULTS).
        return {k: v for k, v in self.profile.defaults.items() if k not in LOCAL_SERVE_DEFAULTS}

    def __init__(
        self,
        profile: Profile,
        registry: Registry | None = None,
        *,
        watcher_options: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(profile, registry)
        self.workdir = local_workdir(profile)
        self._watcher_options = dict(watcher_options or {})
        self._noted_checkpoints: dict[str, str] = {}

    def watcher_options(self) -> dict[str, Any]:
        # Status is a file read: poll it often.
        return {"status_interval": 2.0, "rank_interval": 0.5, "first_poll": 0.2, **self._watcher_options}

    # --- submit --------------------------------------------------------------------------
    def render(self, spec: JobSpec) -> str:
        plan = plan_of(spec)
        if plan is None:
            return render_batch(spec) + _sync_lines(spec, '"$JT_JOB_DIR/code"')
        limit = f", at most {plan.limit} at once" if plan.limit else ""
        tasks = ", ".join(plan.labels[:8]) + (", ..." if len(plan) > 8 else "")
        shebang, _, rest = render_batch(spec).partition("\n")
        return (f"{shebang}\n# An array of {len(plan)} tasks{limit} ({tasks}): each runs this batch "
                "step in its own job directory\n# tasks/<i>, with JT_PARAMS (JSON) and "
                "SLURM_ARRAY_TASK_ID; a Python body sees its parameters as the dict params.\n" + rest)

    def _sync_manifest(self, spec: JobSpec) -> tuple[Any, dict[str, str]] | None:
        """--sync: the notebook's files to copy (size cap and ignore rules applied), or None."""
        if not spec.sync:
            return None
        return notebook_manifest(spec.sync, self.profile.settings)

    def _new_jobdir(self, name: str) -> tuple[str, Path]:
        """The next job id (a counter under a lock) and its fresh directory."""
        try:
            return self._next_jobdir(name)
        except OSError as exc:  # e.g. ELOOP: a symlink planted as the counter's lock
            where = f" ({exc.filename})" if exc.filename else ""
            raise SubmitError(f"cannot take the next job id in {self.workdir}: "
                              f"{exc.strerror or exc}{where}") from None

    def _next_jobdir(self, name: str) -> tuple[str, Path]:
        if not os.path.lexists(self.workdir):  # a symlink there is refused below, not followed
            # 0710: the user's group may traverse to the checkpoints, not list the jobs.
            self.workdir.mkdir(parents=True, exist_ok=True, mode=0o700)
            check_workdir_owner(self.workdir)
            self.workdir.chmod(0o710)
        check_workdir_owner(self.workdir)
        with os.fdopen(_open_private(self.workdir / _COUNTER_LOCK, os.O_RDWR | os.O_CREAT), "r+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            counter = self.workdir / _COUNTER
            try:
                with os.fdopen(_open_private(counter, os.O_RDONLY), encoding="utf-8") as f:
                    last = int(f.read(32).strip() or 0)
            except (OSError, ValueError):
                last = 0
            last = max(0, min(last, 10**12))
            while True:
                last += 1
                jobdir = self.workdir / f"{last}-{name}"
                try:
                    jobdir.mkdir(mode=0o700)
                except FileExistsError:
                    continue
                jobdir.chmod(0o710)  # as on Slurm: traversable to the checkpoints, files 0600
                break
            tmp = counter.with_name(counter.name + ".tmp")
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()  # a stale file, or a planted symlink: removed, never written through
            with os.fdopen(_open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "w") as f:
                f.write(f"{last}\n")
            os.replace(tmp, counter)
        return str(last), jobdir

    def submit(self, spec: JobSpec) -> Job:
        """Write the job directory, start its supervisor detached, record the job."""
        if plan_of(spec) is not None:
            return self._submit_array(spec)
        script = self.render(spec)
        files = job_files(spec)
        files[jobstate.BATCH_FILE] = (script, 0o600)
        synced = self._sync_manifest(spec)
        job_id, jobdir = self._new_jobdir(spec.name)
        if synced is not None:  # --sync: a copy, so editing the notebook's files changes no job
            copy_tree(*synced, jobdir / SYNC_DIR)
        for fname, (content, mode) in files.items():
            fd = os.open(jobdir / fname, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(content)
        (jobdir / RANKS_DIR).mkdir(mode=0o700)
        os.close(_open_private(jobdir / LOG_NAME, os.O_WRONLY | os.O_CREAT))
        plan = {
            "job_id": job_id,
            "name": spec.name,
            "nodes": spec.nodes,
            "ranks_per_node": spec.ranks_per_node,
            "launcher": spec.launcher,
            "program": _program(spec, jobdir),
            "rdzv_port": spec.rdzv_port,
            "cpus_per_task": spec.cpus_per_task,
            "time_limit_s": slurmenv.parse_time_limit(spec.time),
        }
        with os.fdopen(_open_private(jobdir / jobstate.PLAN_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "w",
                       encoding="utf-8") as f:
            f.write(_json(plan))
        now = time.time()
        jobstate.write_state(jobdir, {
            "job_id": job_id,
            "name": spec.name,
            "state": "PENDING",
            "submitted_at": now,
            "world_size": spec.world_size,
            "nodelist": slurmenv.nodelist(spec.nodes),
            "updated_at": now,
        })
        self._launch(jobdir)
        record = JobRecord(
            profile=self.name,
            tier=self.backend,
            job_id=job_id,
            name=spec.name,
            jobdir=str(jobdir),
            world_size=spec.world_size,
            spec=spec_for_record(spec),
            script=script,
            detail=encode_detail(os.path.expanduser(expected_checkpoint_dir(
                spec.checkpoint_dir, str(jobdir), spec.name, job_id)), None),
        )
        self.registry.add(record)
        return Job(self, record)

    def _submit_array(self, spec: JobSpec) -> Job:
        """An array: one directory ``ID-NAME`` with a complete job directory per task
        (``tasks/<i>``, job id ``ID_i``), run by one detached array supervisor that keeps at most
        the array's limit of tasks running (local/array_supervisor.py). One registry record."""
        plan = plan_of(spec)
        assert plan is not None
        script = self.render(spec)
        synced = self._sync_manifest(spec)
        array_id, arraydir = self._new_jobdir(spec.name)
        (arraydir / TASKS_DIR).mkdir(mode=0o700)
        if synced is not None:  # one copy for every task
            copy_tree(*synced, arraydir / SYNC_DIR)
        now = time.time()
        for i, params in zip(plan.indices, plan.params, strict=True):
            task_id, taskdir = f"{array_id}_{i}", arraydir / TASKS_DIR / str(i)
            taskdir.mkdir(mode=0o700)
            task_spec = spec
            if spec.checkpoint_dir is None:  # as a job's: {workdir}/{name}/{job id}/checkpoints
                with contextlib.suppress(SpecError):
                    task_spec = replace(spec, checkpoint_dir=os.path.join(
                        self.workdir, spec.name, task_id, "checkpoints"))
                    validate_spec(task_spec)
            files = task_files(task_spec, job_files(task_spec))
            files[PARAMS_FILE] = (params_json(params) + "\n", 0o600)
            files[jobstate.BATCH_FILE] = (render_batch(task_spec) + "".join(
                f"export {k}={shlex.quote(v)}\n" for k, v in (
                    ("JT_PARAMS", params_json(params)), ("SLURM_ARRAY_JOB_ID", array_id),
                    ("SLURM_ARRAY_TASK_ID", str(i)), ("SLURM_ARRAY_TASK_COUNT", str(len(plan))),
                    ("SLURM_ARRAY_TASK_MIN", str(plan.indices[0])),
                    ("SLURM_ARRAY_TASK_MAX", str(plan.indices[-1])))) + _sync_lines(
                        spec, shlex.quote(str(arraydir / SYNC_DIR))), 0o600)
            self._write_job_dir(task_spec, taskdir, task_id, files, now)
        with os.fdopen(_open_private(arraydir / ARRAY_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "w",
                       encoding="utf-8") as f:
            f.write(_json({"tasks": list(plan.indices), "limit": plan.limit}))
        self._launch(arraydir, "jupyter_tiers.local.array_supervisor")
        record = JobRecord(profile=self.name, tier=self.backend, job_id=array_id, name=spec.name,
                           jobdir=str(arraydir), world_size=spec.world_size, spec=spec_for_record(spec),
                           script=script, detail=counts_detail([JobState.PENDING] * len(plan)))
        self.registry.add(record)
        return self.job(record)

    def _write_job_dir(self, spec: JobSpec, jobdir: Path, job_id: str,
                       files: dict[str, tuple[str, int]], now: float) -> None:
        """A task's job directory as submit writes a job's: files, ranks/, job.log, plan, state."""
        for fname, (content, mode) in files.items():
            fd = os.open(jobdir / fname, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(content)
        (jobdir / RANKS_DIR).mkdir(mode=0o700)
        os.close(_open_private(jobdir / LOG_NAME, os.O_WRONLY | os.O_CREAT))
        plan = {"job_id": job_id, "name": spec.name, "nodes": spec.nodes,
                "ranks_per_node": spec.ranks_per_node, "launcher": spec.launcher,
                "program": _program(spec, jobdir), "rdzv_port": spec.rdzv_port,
                "cpus_per_task": spec.cpus_per_task, "time_limit_s": slurmenv.parse_time_limit(spec.time)}
        with os.fdopen(_open_private(jobdir / jobstate.PLAN_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "w",
                       encoding="utf-8") as f:
            f.write(_json(plan))
        jobstate.write_state(jobdir, {"job_id": job_id, "name": spec.name, "state": "PENDING",
                                      "submitted_at": now, "world_size": spec.world_size,
                                      "nodelist": slurmenv.nodelist(spec.nodes), "updated_at": now})

    def _launch(self, jobdir: Path, module: str = "jupyter_tiers.local.supervisor") -> None:
        """Start the supervisor in its own session; it forks away and this returns at once."""
        # ``python -m`` puts the working directory first on sys.path: start where this package is
        # importable from (the supervisor then moves into the job directory).
        root = Path(__file__).resolve().parents[2]  # the directory that holds jupyter_tiers/
        argv = [sys.executable, "-m", module, "--detach", str(jobdir)]
        log_flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        with os.fdopen(_open_private(jobdir / jobstate.SUPERVISOR_LOG, log_flags), "ab") as log:
            proc = subprocess.Popen(
                argv,
                cwd=root,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                close_fds=True,
            )
        try:
            code = proc.wait(timeout=LAUNCH_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            code = None
        if code != 0 or not (jobdir / jobstate.PID_FILE).exists():
            tail = tail_text(jobdir / jobstate.SUPERVISOR_LOG)
            how = "did not start in time" if code is None else f"exited {code}"
            message = f"the local supervisor {how}: {tail or 'no message'} (job dir {jobdir})"
            state = jobstate.read_state(jobdir) or {}
            if state.get("state") == "PENDING":
                state.update(state="FAILED", reason=message, **jobstate.end_stamp(state))
                jobstate.write_state(jobdir, state)
            raise SubmitError(message)

    # --- status --------------------------------------------------------------------------
    def poll_scheduler(self, records: Sequence[JobRecord]) -> dict[str, SchedulerInfo]:
        out: dict[str, SchedulerInfo] = {}
        listed: dict[str, tuple[str, str | None]] = {}
        for rec in records:
            try:
                info = self._scheduler_info(rec)
            except (OSError, ValueError, TypeError, OverflowError) as exc:  # one bad job directory
                info = SchedulerInfo(rec.job_id, JobState.UNKNOWN,
                                     reason=f"cannot read {Path(rec.jobdir) / jobstate.STATE_FILE}: {exc}")
            if info is not None:
                out[rec.job_id] = info
            directory = decode_detail(rec.detail)[0]
            if directory:  # listed after the state was read, as on Slurm
                listed[rec.key] = (directory, newest_checkpoint(directory))
        attach_checkpoints(records, out, listed, self.registry, self._noted_checkpoints)
        return out

    def _scheduler_info(self, rec: JobRecord) -> SchedulerInfo | None:
        jobdir = Path(rec.jobdir)
        state = jobstate.read_state(jobdir)
        if state is None:
            if not jobdir.exists():
                return SchedulerInfo(rec.job_id, JobState.FAILED, reason=f"job directory {jobdir} is gone")
            return None
        if state.get("state") not in jobstate.TERMINAL_STATES:
            pid, start = jobstate.supervisor_pid(jobdir, state)
            if pid is not None and not processes.process_alive(pid, start):
                again = jobstate.read_state(jobdir) or state  # it may have ended just now
                if again.get("state") in jobstate.TERMINAL_STATES:
                    state = again
                else:
                    state = jobstate.recover_lost(jobdir, again, pid)
        return _scheduler_info(rec.job_id, state)

    def poll_ranks(self, records: Sequence[JobRecord]) -> dict[str, dict[int, RankState]]:
        return {rec.job_id: read_ranks(Path(rec.jobdir)) for rec in records}

    def usage_series(self, record: JobRecord, max_samples: int = USAGE_MAX_SAMPLES) -> UsageSeries:
        """The job's usage/ files, read here (each file's last ``max_samples`` lines)."""
        return read_usage_series(Path(record.jobdir), max_samples)

    def ask_stacks(self, record: JobRecord, rid: str) -> None:
        """Write the request file the ranks' shims look at (batch/stacks.py)."""
        write_stacks_request(Path(record.jobdir), rid)

    def read_stacks(self, record: JobRecord) -> str:
        return read_stacks_text(Path(record.jobdir))

    # --- logs ----------------------------------------------------------------------------
    def open_log(self, record: JobRecord, offset: int) -> ByteStream:
        return FileFollower(Path(record.jobdir) / LOG_NAME, offset)

    def read_log(self, record: JobRecord, offset: int = 0) -> bytes:
        try:
            with open(Path(record.jobdir) / LOG_NAME, "rb") as f:
                f.seek(offset)
                return f.read()
        except FileNotFoundError:
            return b""

    def log_chunks(self, record: JobRecord, offset: int = 0) -> Generator[bytes, None, None]:
        """The merged log from ``offset`` to its size when opened, read LOG_CHUNK bytes at a time
        (a log of any size is never whole in memory; a running job's later lines are not read)."""
        try:
            with open(Path(record.jobdir) / LOG_NAME, "rb") as f:
                left = os.fstat(f.fileno()).st_size - offset
                f.seek(offset)
                while left > 0:
                    chunk = f.read(min(LOG_CHUNK, left))
                    if not chunk:
                        return
                    left -= len(chunk)
                    yield chunk
        except FileNotFoundError:
            return

    def task_checkpoints(self, record: JobRecord, tail_lines: int = 0
                         ) -> tuple[dict[int, tuple[str, str | None]], dict[int, str] | None]:
        """Every task's checkpoint directory and newest entry of the array ``record``: task ``i``
        writes to ``{workdir}/{name}/{ID}_{i}/checkpoints`` (see _submit_array). No log tails:
        the caller reads them itself (no round trip to save here)."""
        listed: dict[int, tuple[str, str | None]] = {}
        for rec in task_records(record):
            directory = default_checkpoint_dir(record.jobdir, record.name, rec.job_id)
            listed[task_index(rec.job_id)] = (directory, newest_checkpoint(directory))
        return listed, None

    def tail_log(self, record: JobRecord, lines: int) -> bytes:
        """The last ``lines`` lines, read backwards from the end (as ``tail -n``: memory for those
        lines only, however long the log)."""
        if lines <= 0:
            return b""
        try:
            with open(Path(record.jobdir) / LOG_NAME, "rb") as f:
                return read_last_lines(f, lines)
        except FileNotFoundError:
            return b""

    def log_size(self, record: JobRecord) -> int:
        try:
            return (Path(record.jobdir) / LOG_NAME).stat().st_size
        except FileNotFoundError:
            return 0

    def rank_log(self, record: JobRecord, rank: int, tail: int | None = None) -> list[LogLine]:
        if tail is not None and tail <= 0:
            return []
        lines: deque[LogLine] = deque(maxlen=tail)
        prefix = f"{int(rank)}:".encode()
        offset = 0
        try:
            f = open(Path(record.jobdir) / LOG_NAME, "rb")  # noqa: SIM115
        except FileNotFoundError:
            return []
        with f:
            for raw in f:
                offset += len(raw)
                if not raw.startswith(prefix):
                    continue
                r, text = split_log_line(raw.decode("utf-8", errors="replace").rstrip("\n").rstrip("\r"))
                if r == rank:
                    lines.append(LogLine(text=text, rank=r, end_offset=offset))
        return list(lines)

    # --- cancel --------------------------------------------------------------------------
    def list_files(self, record: JobRecord) -> list[FileInfo]:
        return _list_files(record)

    def file_chunks(self, record: JobRecord, name: str, offset: int) -> Iterator[bytes]:
        return _file_chunks(record, name, offset)

    def file_sha256(self, record: JobRecord, name: str) -> str | None:
        try:
            return file_sha256(remote_path(name, record.jobdir, decode_detail(record.detail)[0]))
        except OSError:
            return None

    def cancel(self, record: JobRecord) -> None:
        """Ask the supervisor to stop every rank (no error if the job already ended)."""
        jobdir = Path(record.jobdir)
        state = jobstate.read_state(jobdir)
        if state is None or state.get("state") in jobstate.TERMINAL_STATES:
            return
        with contextlib.suppress(OSError):
            (jobdir / jobstate.CANCEL_FILE).write_text(f"{time.time():.6f} {os.getpid()}\n")
        if state.get("state") == "PENDING":
            return  # its signal handlers may not be installed yet; it reads the cancel file first
        pid, start = jobstate.supervisor_pid(jobdir, state)
        if pid is not None and processes.process_alive(pid, start):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
        else:
            self._scheduler_info(record)  # a lost supervisor: stop what is left, record it


def _list_files(record: JobRecord) -> list[Any]:
    return list_local(record.jobdir, decode_detail(record.detail)[0])


def _file_chunks(record: JobRecord, name: str, offset: int) -> Iterator[bytes]:
    return local_chunks(remote_path(name, record.jobdir, decode_detail(record.detail)[0]), offset)


def _json(data: Any) -> str:
    import json

    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def _iso(ts: Any) -> str | None:
    if not isinstance(ts, (int, float)):
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ts))


def _scheduler_info(job_id: str, state: dict[str, Any]) -> SchedulerInfo:
    start = state.get("start_time")
    end = state.get("end_time")
    elapsed = jobstate.elapsed_s(state, now_wall=time.time(), now_boot=jobstate.boottime(),
                                 boot=jobstate.boot_id())
    return SchedulerInfo(
        job_id=job_id,
        state=JobState.parse(str(state.get("state") or "UNKNOWN")),
        reason=state.get("reason"),
        nodelist=state.get("nodelist"),
        start_time=_iso(start),
        end_time=_iso(end),
        elapsed_s=elapsed,
        exit_code=state.get("exit_code"),
        exit_signal=state.get("exit_signal"),
        name=state.get("name"),
    )

