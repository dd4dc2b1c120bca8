"""SlurmTier: submit, batched status, per-rank state, logs and cancel over one SSH connection, or
as local commands when Jupyter runs on the cluster (a profile without ``host``)."""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Generator, Iterator, Sequence
from dataclasses import replace
from typing import Any

from ..batch.arrays import counts_detail, plan_of
from ..batch.efficiency import Accounting, parse_accounting
from ..batch.history import AccountingDisabled, HistoryQuery, HistoryRow, make_query, mark_ours
from ..batch.jobdir import (
    checkpoint_root,
    disk_full_note,
    expected_checkpoint_dir,
    parse_free_space,
    parse_listing,
    parse_rank_files,
    split_listing,
)
from ..batch.jobenv import refuse_own_job
from ..batch.logs import ByteStream, split_log_line
from ..batch.pending import submit_words
from ..batch.requeue import requeue_pending
from ..batch.status import ended_failure
from ..batch.usage import USAGE_MAX_SAMPLES, UsageSeries, parse_usage_dump
from ..config.profiles import Profile
from ..config.registry import MAX_LIST, JobRecord, Registry, spec_for_record
from ..core.detail import entries
from ..core.errors import ControllerUnreachable, SubmitError, TiersError
from ..core.model import JobSpec, JobState, LogLine, RankState, SchedulerInfo, WorkKind
from ..data.checkpoint_upload import uploader_source
from ..data.files import HASH_LIMIT, MAX_FILES, FileInfo, TransferCut, remote_path
from ..data.files import parse_listing as parse_file_listing
from ..data.handoff import attach_checkpoints, decode_detail, encode_detail
from ..data.sync import notebook_manifest
from ..engine.handles import Job
from ..engine.tier import BatchTier
from ..transport.base import Transport
from ..transport.errors import ConnectError
from ..transport.exchange import CommandResult
from ..transport.local import LocalTransport
from ..transport.ssh import SSHTarget, SSHTransport
from . import commands, submit_here
from .files_remote import cat_argv, list_argv, sha_argv
from .follow_local import follow_here_argv
from .history import ACCOUNTING_DOWN, history_argv, history_result, parse_tail_output, tail_output_argv
from .parse import (
    expand_hostlist,
    parse_failed_nodes,
    parse_sacct,
    parse_sbatch_parsable,
    parse_scontrol_jobs,
    parse_squeue,
)
from .render import RenderedJob, render_job
from .sync_remote import SyncOutcome, sync_root, sync_to_cluster
from .task_listing import parse_task_checkpoints, task_checkpoints_argv

log = logging.getLogger(__name__)

_UNREACHABLE_MARKERS = (
    "Unable to contact slurm controller",
    "Socket timed out",
    "Zero Bytes were transmitted",
    "Connection refused",
)

#: How many times a submit (and --sync's upload) is sent when the connection drops under it
#: (each retry idempotent).
SUBMIT_ATTEMPTS = 4

NO_SPACE = "No space left on device"
_NO_ACCOUNTING_MARKERS = ("accounting storage is disabled", "Slurm accounting storage is disabled")


def runs_here(profile: Profile) -> bool:
    """Whether a slurm profile runs Slurm's commands on this machine (it has no ``host``)."""
    return not profile.get("host")


def transport_for(profile: Profile) -> Transport:
    """The transport of a slurm profile: SSH to its ``host``, or local commands without one.
    Nothing of the profile's ``env`` reaches a Slurm command (config refuses Slurm's own names in
    it; its options reach sbatch as command-line options, see jobenv.clean_env)."""
    if runs_here(profile):
        return LocalTransport(label=f"profile {profile.name!r}")
    return ssh_transport_for(profile)


def ssh_transport_for(profile: Profile) -> SSHTransport:
    """An SSH transport from a slurm profile's connection settings. A profile an untrusted
    project file defines itself connects isolated: only its host, port and user, nothing of the
    user's ssh config, agent or keys (SSHTarget.isolated)."""
    target = SSHTarget(
        host=profile.get("host"),
        port=profile.get("port"),
        user=profile.get("user"),
        identity_file=profile.get("identity_file"),
        known_hosts=profile.get("known_hosts"),
        proxy_jump=profile.get("proxy_jump"),
        ssh_config=profile.get("ssh_config"),
        connect_timeout=float(profile.get("connect_timeout", 15.0)),
        isolated=profile.project_defined,
    )
    return SSHTransport(target, label=f"profile {profile.name!r}")


class SlurmTier(BatchTier):
    """A Slurm cluster reached over SSH (or on this machine: LocalTransport). One connection and
    one watcher for all its jobs."""

    backend = "slurm"

    def __init__(
        self,
        profile: Profile,
        registry: Registry | None = None,
        transport: Transport | None = None,
    ) -> None:
        super().__init__(profile, registry)
        self._transport = transport
        self.accounting: bool | None = None  # learned on first sacct call
        self._noted_checkpoints: dict[str, str] = {}
        self._rank_notes: dict[str, str] = {}  # job id -> a full disk under its job directory

    @property
    def transport(self) -> Transport:
        with self._lock:
            if self._transport is None:
                self._transport = transport_for(self.profile)
            return self._transport

    @property
    def opened_transport(self) -> Transport | None:
        """The transport once this tier has made one (None before; nothing is opened here)."""
        return self._transport

    def login(self) -> str:
        transport = self.transport
        was = transport.connected
        transport.connect()
        if isinstance(transport, LocalTransport):
            return (f"{self.name} runs Slurm's commands on {transport.target}: nothing to log in "
                    "to; its jobs, watchers and logs use local commands")
        how = "was already connected to" if was else "connected to"
        note = "; the one-time code is not kept: a reconnect asks again" if transport.code_prompts else ""
        return (f"{self.name} {how} {transport.target}: its jobs, watchers and logs share this "
                f"connection{note}")

    def watcher_options(self) -> dict[str, Any]:
        opts: dict[str, Any] = {}
        if self.profile.get("status_interval") is not None:
            opts["status_interval"] = float(self.profile.get("status_interval"))
        if self.profile.get("rank_interval") is not None:
            opts["rank_interval"] = float(self.profile.get("rank_interval"))
        return opts

    def render(self, spec: JobSpec) -> str:
        sync_dir = None
        if spec.sync:
            sync_dir = f"{sync_root(self.profile.workdir, spec.name)}/snap/TOKEN-AT-SUBMIT"
        return render_job(spec, sync_dir).script

    def sync(self, spec: JobSpec) -> SyncOutcome | None:
        """--sync: bring the cluster's copy of the notebook's directory up to date (one round
        trip when nothing changed) and snapshot it for this job; a SyncOutcome, None without
        --sync (slurm/sync_remote.py)."""
        if not spec.sync:
            return None
        manifest, sources = notebook_manifest(spec.sync, self.profile.settings)
        for attempt in range(SUBMIT_ATTEMPTS):
            try:
                return sync_to_cluster(self.transport, self.profile.workdir, spec.name, manifest,
                                       sources)
            except ConnectError as e:
                if e.at_connect:  # no connection at all after the transport's own retries
                    raise
                # Safe to start over: the cluster side takes turns under a lock, and a cut apply
                # leaves the stored manifest without the entries it was changing (re-sent).
                if attempt == SUBMIT_ATTEMPTS - 1:
                    raise SubmitError(f"--sync: the connection dropped {SUBMIT_ATTEMPTS} times "
                                      f"while sending the notebook's files ({e})") from None
                log.info("connection lost during --sync of %s (%s); starting over", spec.name, e)
        raise AssertionError("unreachable")  # pragma: no cover

    def submit(self, spec: JobSpec) -> Job:
        """Write the job directory and run sbatch in one round trip; record the job (after
        --sync's round trip or two)."""
        synced = self.sync(spec)
        rendered = render_job(spec, synced.snapshot if synced else None)
        plan = plan_of(spec)
        workdir = commands.check_workdir(self.profile.workdir)
        jobdir = f"{workdir}/{commands.job_dir_name(spec.name, token=secrets.token_hex(3))}"
        if isinstance(self.transport, LocalTransport):
            result = self._submit_here(self.transport, jobdir, rendered)
        else:
            result = self._submit_once(jobdir, commands.pack_job(rendered), rendered.options)
        if result.exit_status != 0:
            err = result.stderr.decode("utf-8", errors="replace").strip()
            if result.exit_status == commands.UNSAFE_WORKDIR_EXIT and not isinstance(
                    self.transport, LocalTransport):  # a workdir another user could swap
                raise SubmitError(err.splitlines()[-1] if err else "the workdir was refused")
            if NO_SPACE in err:  # the job directory's files, or sbatch's own, did not fit
                raise SubmitError(f"the cluster's disk holding {workdir} is full: cannot write the "
                                  f"job directory {jobdir} ({NO_SPACE}); nothing was submitted")
            words = submit_words(err)  # a refusal known here: what it means, then sbatch's words
            raise SubmitError(f"sbatch refused the job: {words} ({err[-300:]})" if words else
                              f"sbatch refused the job: {err[-500:] or 'no message'}")
        lines = result.text().strip().splitlines()
        job_id = parse_sbatch_parsable(lines[0] if lines else "")
        abs_dir = lines[-1].strip() if len(lines) >= 2 else jobdir
        checkpoints = expected_checkpoint_dir(spec.checkpoint_dir, abs_dir, spec.name, job_id)
        record = JobRecord(
            profile=self.name,
            tier=self.backend,
            job_id=job_id,
            name=spec.name,
            jobdir=abs_dir,
            world_size=spec.world_size,
            spec=spec_for_record(spec),
            script=rendered.script,
            detail=encode_detail(checkpoints, None),
        )
        if plan is not None:  # an array: one record, its tasks derived from it (arrays.py)
            record = replace(record, detail=counts_detail([JobState.PENDING] * len(plan)))
        self.registry.add(record)
        return self.job(record)

    def _submit_once(self, jobdir: str, packed: bytes, options: Sequence[str] = ()) -> CommandResult:
        """Run the submit program, again with the same job directory when the connection drops
        (the program answers the first run's job id if that one reached sbatch): one job per
        submit, never two, never one the registry does not know."""
        for attempt in range(SUBMIT_ATTEMPTS):
            try:
                return self.transport.run(
                    commands.submit_argv(jobdir, packed, options, again=attempt > 0),
                    stdin=packed, check=False)
            except ConnectError as e:
                if e.at_connect:  # no connection at all after the transport's own retries
                    raise
                if attempt == SUBMIT_ATTEMPTS - 1:
                    raise SubmitError(
                        f"the connection dropped {SUBMIT_ATTEMPTS} times while submitting ({e}); "
                        f"the job may have been submitted from {jobdir}: see squeue") from None
                log.info("connection lost while submitting to %s (%s); asking again", jobdir, e)
        raise AssertionError("unreachable")  # pragma: no cover

    def _submit_here(self, transport: LocalTransport, jobdir: str, rendered: RenderedJob
                     ) -> CommandResult:
        """The local submit (slurm/submit_here.py): the job directory written from here, then
        one ``sbatch`` in it under umask 077; answers as the SSH program does (job id, then the
        directory), a full disk as its "No space left on device"."""
        argv = submit_here.sbatch_here_argv(rendered.options)
        try:
            path = submit_here.write_job_dir(submit_here.expand_home(jobdir, transport.home()),
                                             rendered.files)
        except OSError as e:
            if submit_here.is_no_space(e):
                return CommandResult(tuple(argv), 1, b"", f"{e.filename}: {NO_SPACE}".encode())
            raise SubmitError(f"cannot write the job directory {jobdir}: {e.strerror or e}") from None
        result = transport.run(argv, check=False, cwd=path, umask=submit_here.SUBMIT_UMASK)
        if result.exit_status != 0:
            return result
        answer = result.text().strip()
        try:
            submit_here.note_job_id(path, answer + "\n")
        except OSError as e:  # the job is submitted: a missing .jobid only costs a retry's answer
            log.warning("job %s: cannot write %s/.jobid (%s)", answer, path, e)
        return CommandResult(tuple(argv), 0, f"{answer}\n{path}\n".encode(), result.stderr)

    def _run_scheduler(self, argv: list[str]) -> tuple[int, str, str]:
        result = self.transport.run(argv, check=False)
        out = result.stdout.decode("utf-8", errors="replace")
        err = result.stderr.decode("utf-8", errors="replace")
        # sacct's "Problem talking to the database: Connection refused" is slurmdbd's, not the
        # controller's: history_result says so.
        if result.exit_status != 0 and any(m in err for m in _UNREACHABLE_MARKERS) \
                and not any(m in err for m in ACCOUNTING_DOWN):
            raise ControllerUnreachable(err.strip().splitlines()[-1] if err.strip()
                                        else commands.unwrap_slurm(argv)[0])
        return result.exit_status, out, err

    def poll_scheduler(self, records: Sequence[JobRecord]) -> dict[str, SchedulerInfo]:
        """squeue for all jobs at once; sacct (or scontrol) only for those squeue no longer has.

        The squeue round trip also lists each job's checkpoint directory (after squeue, so a
        job squeue calls COMPLETED, or has purged, is listed as it ended).
        """
        # An array's tasks ("51_3") are all asked for by the array's id: one query for any count.
        ids = sorted({r.job_id.split("_")[0] for r in records}, key=int)
        if not ids:
            return {}
        listed = [(r, d) for r in records if (d := decode_detail(r.detail)[0])]
        argv = commands.with_checkpoints(commands.squeue_argv(ids), [d for _, d in listed])
        code, out, err = self._run_scheduler(argv)
        out, listing = split_listing(out)
        found = parse_squeue(out) if code == 0 else {}
        found = requeue_pending(found, (r.job_id for r in records if r.spec.get("requeue")))
        if code != 0 and "Invalid job id" not in err:
            raise ControllerUnreachable(err.strip() or f"squeue exited {code}")
        # squeue is authoritative while it still knows a job; accounting only for purged ones.
        missing = list(dict.fromkeys(r.job_id for r in records if r.job_id not in found))
        if missing:
            found.update(self._finished(missing))
        by_index = parse_listing(listing)
        dirs = {rec.key: by_index[i] for i, (rec, _) in enumerate(listed) if i in by_index}
        attach_checkpoints(records, found, dirs, self.registry, self._noted_checkpoints)
        return self._name_failed_nodes(found)

    def _name_failed_nodes(self, found: dict[str, SchedulerInfo]) -> dict[str, SchedulerInfo]:
        """A NODE_FAIL job gets the nodes of its list that are out of service (one sinfo for
        all such jobs), so that what the user sees names the node, not only "NodeDown"."""
        failed = {k: i for k, i in found.items() if i.state is JobState.NODE_FAIL and i.nodelist}
        if not failed:
            return found
        try:
            code, out, _ = self._run_scheduler(
                commands.node_states_argv(sorted({i.nodelist or "" for i in failed.values()})))
        except (TiersError, ValueError):  # the state is right without the names
            return found
        down = parse_failed_nodes(out) if code == 0 else {}
        for key, info in failed.items():
            mine = tuple((n, down[n]) for n in expand_hostlist(info.nodelist or "") if n in down)
            if mine:
                found[key] = replace(info, failed_nodes=mine)
        return found

    def _finished(self, ids: list[str]) -> dict[str, SchedulerInfo]:
        if self.accounting is not False:
            got: dict[str, SchedulerInfo] = {}
            plain = [i for i in ids if "_" not in i]
            tasks = [i for i in ids if "_" in i]  # at most one more query, for every array task
            for argv in ([commands.sacct_argv(plain)] if plain else []) + (
                    [commands.sacct_tasks_argv(tasks)] if tasks else []):
                code, out, err = self._run_scheduler(argv)  # slurmdbd down: scontrol below
                if code == 0:
                    self.accounting = True
                    got.update(parse_sacct(out))
                elif any(m in err for m in _NO_ACCOUNTING_MARKERS):
                    self.accounting = False
                    break
            if all(i in got for i in ids):  # only those asked: squeue's rows stay as they are
                return {i: got[i] for i in ids}
        code, out, _ = self._run_scheduler(commands.scontrol_jobs_argv())
        every = parse_scontrol_jobs(out) if code == 0 else {}
        return {i: every[i] for i in ids if i in every}

    def history(self, query: HistoryQuery | None = None, **filters: Any) -> list[HistoryRow]:
        """Jobs from Slurm accounting in one sacct call (every submitter's, not only ours),
        newest first, at most ``limit``; the ones this registry submitted are marked ``ours``.
        Filters (or a ready ``query``): ``days=7``, ``user=None`` (the login user; ``"all"``),
        ``states="FAILED,TIMEOUT"``, ``limit=50``, ``job="123"``, e.g.
        ``connect("hpc").history(days=2, states="FAILED")``. Raises AccountingDisabled when the
        cluster keeps no accounting."""
        query = query or make_query(**filters)
        code, out, err = self._run_scheduler(history_argv(query))
        try:
            rows = history_result(code, out, err)
        except AccountingDisabled:
            self.accounting = False
            raise
        self.accounting = True
        mine = self.registry.list(limit=MAX_LIST, profile=self.name, kind=WorkKind.JOB)
        known = {r.job_id: r.key for r in mine}
        failures = {r.job_id: ended_failure(entries(r.detail)) for r in mine}
        return mark_ours(rows[: query.limit], known, failures)

    def output_tail(self, row: HistoryRow, lines: int = 50) -> tuple[str, str | None]:
        """The last ``lines`` of a history job's output (read-only, for jobs submitted without
        jupyter-tiers): at the path slurmctld reports while it still knows the job, else at
        sbatch's default ``WORKDIR/slurm-ID.out``. Returns (path, text), text None when that
        file is missing or this account cannot read it."""
        default = row.default_log or "/dev/null/unknown"  # no workdir: only scontrol can say
        result = self.transport.run(tail_output_argv(row.ref, default, lines), check=False,
                                    timeout=300)
        path, text = parse_tail_output(result.exit_status, result.text())
        return (path if row.default_log or path != default else ""), text

    def poll_ranks(self, records: Sequence[JobRecord]) -> dict[str, dict[int, RankState]]:
        if not records:
            return {}
        result = self.transport.run(commands.ranks_argv([r.jobdir for r in records]), check=False)
        text = result.text()
        by_dir = parse_rank_files(text)
        free = parse_free_space(text)
        self._rank_notes = {r.job_id: note for r in records
                            if (note := disk_full_note(r.jobdir, free.get(r.jobdir))) is not None}
        return {r.job_id: by_dir.get(r.jobdir, {}) for r in records}

    def rank_notes(self) -> dict[str, str]:
        return dict(self._rank_notes)

    def usage_series(self, record: JobRecord, max_samples: int = USAGE_MAX_SAMPLES) -> UsageSeries:
        """The job's usage/ files in one command over the tier's connection (no scheduler RPC)."""
        lines = max(1, int(max_samples))
        result = self.transport.run(commands.usage_argv(record.jobdir, lines), check=False, timeout=300)
        return parse_usage_dump(result.text())

    def accounting_record(self, record: JobRecord) -> Accounting | None:
        """The job's accounting (one sacct, only when asked: job.efficiency()); None when the
        cluster keeps none or does not know the job yet."""
        if self.accounting is False or "_" in record.job_id:
            return None
        code, out, err = self._run_scheduler(commands.accounting_argv(record.job_id))
        if code != 0:
            if any(m in err for m in _NO_ACCOUNTING_MARKERS):
                self.accounting = False
            return None
        return parse_accounting(out, record.job_id, int(record.spec.get("nodes") or 1))

    def ask_stacks(self, record: JobRecord, rid: str) -> None:
        """One command writes the request into the job directory (no scheduler call)."""
        result = self.transport.run(commands.stacks_ask_argv(record.jobdir, rid), check=False)
        if result.exit_status != 0:
            err = result.stderr.decode("utf-8", "replace").strip()
            raise TiersError(f"cannot ask job {record.job_id} for its stacks: "
                             f"{err[-300:] or f'exit {result.exit_status}'}")

    def read_stacks(self, record: JobRecord) -> str:
        return self.transport.run(commands.stacks_read_argv(record.jobdir), check=False,
                                  timeout=300).text()

    def open_log(self, record: JobRecord, offset: int) -> ByteStream:
        if isinstance(self.transport, LocalTransport):  # no SSH packets to coalesce
            return self.transport.stream(follow_here_argv(record.jobdir, offset))
        return self.transport.stream(commands.follow_argv(record.jobdir, offset))

    def read_log(self, record: JobRecord, offset: int = 0) -> bytes:
        return self.transport.run(commands.read_log_argv(record.jobdir, offset), timeout=300).stdout

    def log_chunks(self, record: JobRecord, offset: int = 0) -> Generator[bytes, None, None]:
        """The merged log from ``offset`` to its current end, as it arrives (a 1 GB log is never
        whole in memory); a stall of 300 s without data raises CommandTimeout."""
        with self.transport.stream(commands.read_log_argv(record.jobdir, offset), timeout=300) as s:
            yield from s

    def tail_log(self, record: JobRecord, lines: int) -> bytes:
        if lines <= 0:
            return b""
        return self.transport.run(commands.tail_log_argv(record.jobdir, lines), timeout=300).stdout

    def log_size(self, record: JobRecord) -> int:
        out = self.transport.run(commands.log_size_argv(record.jobdir)).text().strip()
        return int(out) if out.isdigit() else 0

    def rank_log(self, record: JobRecord, rank: int, tail: int | None = None) -> list[LogLine]:
        out = self.transport.run(commands.grep_rank_argv(record.jobdir, rank, tail), timeout=300)
        lines = []
        for raw in out.text().splitlines():
            r, text = split_log_line(raw)
            if r == rank:
                lines.append(LogLine(text=text, rank=r))
        return lines

    def cancel(self, record: JobRecord) -> None:
        """scancel the job; a job that has already ended is a no-op, a refusal (not the user's
        job, say) a TiersError naming the job and what scancel said. On this machine's Slurm (no
        host), the job this process runs inside (or its array) is refused: :class:`OwnJob`."""
        if isinstance(self.transport, LocalTransport):
            refuse_own_job(record.job_id, os.environ)
        result = self.transport.run(commands.cancel_argv(record.job_id), check=False)
        refusal = commands.scancel_refusal(result.exit_status, result.stderr.decode("utf-8", "replace"))
        if refusal is not None:
            raise TiersError(f"cannot cancel job {record.job_id} on {self.profile.name}: scancel: {refusal}")

    def list_files(self, record: JobRecord) -> list[FileInfo]:
        """The job's files in one remote command (files.py, slurm/files_remote.py)."""
        argv = list_argv(record.jobdir, decode_detail(record.detail)[0], MAX_FILES, HASH_LIMIT)
        return parse_file_listing(self.transport.run(argv, check=False, timeout=300).stdout)

    def file_sha256(self, record: JobRecord, name: str) -> str | None:
        """One file's sha256, hashed on the cluster (``sha256sum``)."""
        path = remote_path(name, record.jobdir, decode_detail(record.detail)[0])
        text = self.transport.run(sha_argv(path), check=False, timeout=3600).text().strip()
        return text if len(text) == 64 else None

    def file_chunks(self, record: JobRecord, name: str, offset: int) -> Iterator[bytes]:
        """One file from ``offset``, streamed over the shared connection (``tail -c``)."""
        path = remote_path(name, record.jobdir, decode_detail(record.detail)[0])
        try:
            with self.transport.stream(cat_argv(path, offset), timeout=300) as stream:
                yield from stream
        except ConnectError as e:
            raise TransferCut(str(e)) from None

    def cancel_array(self, record: JobRecord, tasks: Sequence[JobRecord]) -> None:
        """Cancel every task of an array: one ``scancel`` of the array's id."""
        self.cancel(record)

    def task_checkpoints(self, record: JobRecord, tail_lines: int = 0
                         ) -> tuple[dict[int, tuple[str, str | None]], dict[int, str] | None]:
        """Every task's checkpoint directory and newest entry of the array ``record`` (with
        ``tail_lines``, also the end of each task's log) in one remote command, whatever the
        number of tasks (slurm/task_listing.py). Tasks the scheduler no longer knows are absent."""
        root = checkpoint_root(record.jobdir, record.name)
        try:
            argv = task_checkpoints_argv(record.job_id, root, record.jobdir, tail_lines)
        except (ValueError, TiersError) as exc:
            raise TiersError(f"array {record.job_id}: {exc}") from None
        result = self.transport.run(argv, check=False, timeout=300)
        listed, tails = parse_task_checkpoints(result.text())
        return listed, (tails if tail_lines > 0 else None)

    def run_uploader(self, python: str, data: bytes) -> Iterator[bytes]:
        """The checkpoint uploader as one command on the login node, over this tier's connection
        (the checkpoint never passes through the notebook); its stdout as it comes."""
        with self.transport.stream(commands.upload_argv(python, uploader_source()), timeout=900,
                                   stdin=data) as stream:
            yield from stream

    def close(self) -> None:
        super().close()
        if self._transport is not None:
            self._transport.close()
