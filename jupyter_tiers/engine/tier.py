"""The tier API every backend implements.

A tier is one connection to one cluster (or the local machine), shared by every job and service
of its profile. :class:`Tier` is what every tier shares (profile, registry, handles, building a
spec from the profile's defaults); :class:`BatchTier` runs training jobs with ranks (Slurm, local)
and is driven by the Watcher (watch.py) through three batched calls, ``poll_scheduler``,
``poll_ranks`` and ``open_log``; :class:`ServeTier` runs long-lived services (Kubernetes) and
follows them with its own watches. Both hand a listener the same kind of subscription
(``watch`` -> subscription.Subscription). Magics, widgets and the server only talk to this API.
"""

from __future__ import annotations

import abc
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import fields
from typing import Any, ClassVar, TypeVar

from ..batch.arrays import aggregate_status, counts_text, is_array, record_counts, task_index, task_records
from ..batch.efficiency import Accounting
from ..batch.hang import HangRule
from ..batch.history import HistoryQuery, HistoryRow, no_history_message
from ..batch.logs import ByteStream, LogDecoder
from ..batch.stacks import STACKS_WAIT, Stacks, build_stacks, parse_answers, request_id
from ..batch.status import ended_ids, merge_status
from ..batch.usage import USAGE_MAX_SAMPLES, UsageSeries
from ..config.profiles import Profile
from ..config.registry import JobRecord, Registry
from ..core.errors import ConfigError, JobNotFound, SpecError, TiersError, Unsupported
from ..core.model import (
    JobSpec,
    JobStatus,
    LogLine,
    PodLogLine,
    RankPhase,
    RankState,
    SchedulerInfo,
    ServeSpec,
    ServiceState,
    ServiceStatus,
    WorkKind,
)
from ..data.checkpoint_upload import (
    UploadReport,
    check_checkpoint_to,
    local_uploader,
    task_of,
    upload_checkpoint,
)
from ..data.files import FileInfo
from ..serving.status import CAUSE_LINES, failed_pod
from ..spec.jobspec import validate_spec
from ..spec.options import JOB_OPTIONS, SERVE_OPTIONS, Option, convert_values
from ..spec.servespec import validate_serve_spec
from .array_job import ArrayJob
from .handles import Handle, Job, Service
from .rank_metrics import RankMetrics
from .subscription import Subscription
from .watch import JobSubscription, LinesCallback, StatusCallback, Watcher

__all__ = ["BatchTier", "ByteStream", "Handle", "Job", "ServeTier", "Service", "Tier"]

# Mapping-valued options merge key by key over the profile's; passthrough lists extend it.
#: Most bytes one ``ServeTier.service_logs`` read keeps (every pod's together): the end of the
#: log; what came before is left out and a :func:`cut_marker` line says so.
MAX_SERVICE_LOG_BYTES = 4 << 20
#: Most lines asked of one pod's log when no ``tail`` is given (Kubernetes ``tailLines``).
MAX_SERVICE_LOG_LINES = 20_000
CUT_PREFIX = "[earlier output cut"


def cut_marker(what: str) -> str:
    """The first line of a bounded log read that left earlier output out (no ``: ``, so it is
    never taken for a ``pod: text`` line)."""
    return f"{CUT_PREFIX} — {what}]"


_UPDATED = ("env", "node_selector")
_EXTENDED = ("sbatch_options", "setup")
_STAND_INS = {"script": "", "body": "pass\n", "image": "stand-in:1"}
_Spec = TypeVar("_Spec", bound="JobSpec | ServeSpec")


class Tier(abc.ABC):
    """What every tier shares: its profile, the registry, handles, and specs from defaults."""

    #: The backend that runs this tier's work: ``"slurm"``, ``"kubernetes"`` or ``"local"`` (the
    #: value a profile's ``tier:`` names and a registry record's ``tier`` column holds).
    backend: ClassVar[str] = ""
    #: The tier that runs a record of the other kind of work (a local profile's services from its
    #: batch tier). api.make_tier sets its tier cache here; a tier made without it keeps the record.
    sibling: Callable[[JobRecord], Tier] | None = None

    def __init__(self, profile: Profile, registry: Registry | None = None) -> None:
        self.profile = profile
        self._registry = registry
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.profile.name

    @property
    def kind(self) -> str:
        """Deprecated: the old name of :attr:`backend` (read-only), kept so user code keeps working."""
        return self.backend

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            self._registry = Registry()
        return self._registry

    def handle(self, record: JobRecord) -> Handle:
        """The Job or Service handle of a registry record. A record of the other kind of work
        (a service asked of a local profile's batch tier) gets the tier that runs it."""
        runs = ServeTier if record.kind == WorkKind.SERVICE else BatchTier
        if not isinstance(self, runs) and record.profile == self.name and self.sibling is not None:
            other = self.sibling(record)
            if isinstance(other, runs):
                return handle_for(other, record)
        return handle_for(self, record)

    def login(self) -> str:
        """Connect now, asking for a login node's one-time code if it wants one; one line saying
        where. Only a tier that logs in over SSH does: others raise :class:`Unsupported`."""
        raise Unsupported(f"{self.name} is a {self.profile.tier} profile; only Slurm profiles log in "
                          "(over SSH)")

    def attach(self, ref: str) -> Handle:
        """A handle on a job or service in the registry (``id`` or ``profile/id``)."""
        return self.handle(self.registry.get(ref, profile=self.name))

    @abc.abstractmethod
    def refresh(self, records: Sequence[JobRecord]) -> None:
        """Ask the cluster about these records (batched where it can) and record their states."""

    def close(self) -> None:  # noqa: B027 - optional: only tiers that hold connections override it
        """Stop watching and drop the connection."""

    def _build_spec(self, spec_class: type[_Spec], options: Sequence[Option], body_field: str,
                    validate: Callable[[_Spec], None], body: str, given: dict[str, Any]) -> _Spec:
        """A spec from the body, the profile's defaults, env and setup, then ``given`` options.

        ``env`` (and node selectors) merge key by key over the profile's, passthrough lists
        (``sbatch_options``, ``setup``) extend it, every other option replaces it.
        """
        known = {f.name for f in fields(spec_class)} - {body_field, "metadata"}
        unknown = set(given) - known
        if unknown:
            raise SpecError(sorted(unknown)[0], f"unknown option; known: {', '.join(sorted(known))}")
        values = self._checked_defaults(spec_class, options, validate)
        values["env"] = tuple(self.profile.env.items())
        if "setup" in known:
            values["setup"] = tuple(self.profile.setup)
        given = convert_values({k: v for k, v in given.items() if v is not None}, options)
        for key, value in given.items():
            current = values.get(key)
            if key in _UPDATED and current:
                values[key] = tuple({**dict(current), **dict(value)}.items())
            elif key in _EXTENDED and current:
                values[key] = (*current, *value)
            else:
                values[key] = value
        body_value: dict[str, Any] = {body_field: body}
        return spec_class(**body_value, **values)

    def profile_defaults(self) -> Mapping[str, Any]:
        """The profile's ``defaults`` this tier applies (a tier serving from a profile of
        another kind keeps only the keys its specs have)."""
        return self.profile.defaults

    def _checked_defaults(self, spec_class: type, options: Sequence[Option],
                          validate: Callable[[Any], None]) -> dict[str, Any]:
        """The profile's defaults as spec values; a bad one is blamed on the profile file and
        key, not on a magic option the user did not type."""
        source = self.profile.sources[-1] if self.profile.sources else "tiers.yaml"
        names = {f.name for f in fields(spec_class)}
        try:
            values = convert_values(dict(self.profile_defaults()), options, from_yaml=True)
            # Stand-ins for what a spec needs but defaults rarely set (the body, the image), so
            # that any error left is about a default.
            probe = {k: v for k, v in _STAND_INS.items() if k in names and k not in values}
            validate(spec_class(**{**probe, **values}))
        except SpecError as exc:
            key = f"profiles.{self.name}.defaults.{exc.field.split()[0]}"
            raise ConfigError(source, key, exc.problem) from None
        return values


class BatchTier(Tier):
    """Base of the training tiers (Slurm, local): batch jobs with ranks, a job directory and a
    rank-prefixed log, watched by one polling Watcher per tier."""

    def __init__(self, profile: Profile, registry: Registry | None = None) -> None:
        super().__init__(profile, registry)
        self._watcher: Watcher | None = None

    @property
    def watcher(self) -> Watcher:
        """The one watcher of this tier (started on first use)."""
        with self._lock:
            if self._watcher is None:
                self._watcher = Watcher(self, **self.watcher_options())
                if self.profile.get("hang_after") is not None:  # batch/hang.py
                    self._watcher.hang_rule = HangRule(after=float(self.profile.get("hang_after")))
            return self._watcher

    @property
    def scheduler_queries(self) -> int:
        """Batched scheduler queries this tier's watcher made (0 while it was never started)."""
        watcher = self._watcher
        return watcher.scheduler_queries if watcher is not None else 0

    @property
    def answered_at(self) -> float | None:
        """When this tier's watcher last heard from the scheduler (wall clock); None if it never
        did or never ran. ``%tiers jobs`` counts it as the cluster seen answering."""
        watcher = self._watcher
        return watcher.answered_at if watcher is not None else None

    def watcher_options(self) -> dict[str, Any]:
        return {}

    def watch(self, record: JobRecord, *, on_status: StatusCallback | None = None,
              on_lines: LinesCallback | None = None, on_end: StatusCallback | None = None,
              log_offset: int = 0, skip_partial: bool = False,
              metrics: RankMetrics | None = None) -> JobSubscription:
        """Deliver the job's status changes (and, with ``on_lines``, its log from byte
        ``log_offset``, each batch first fed to ``metrics``) until the subscription is closed;
        ``on_end`` once it has ended and its log (and checkpoint upload) is through. Through
        this tier's one watcher."""
        return self.watcher.watch(record, on_status=on_status, on_lines=on_lines, on_end=on_end,
                                  follow_logs=on_lines is not None, log_offset=log_offset,
                                  skip_partial=skip_partial, metrics=metrics)

    def unwatch(self, subscription: Subscription[JobStatus]) -> None:
        """Stop delivering to one ``watch`` subscription (``subscription.close()``)."""
        subscription.close()

    def make_spec(self, script: str, **options: Any) -> JobSpec:
        """A JobSpec from the cell body, the profile's defaults, setup and env, then ``options``.

        ``env`` in options is merged over the profile's env; ``setup`` is appended to it.
        """
        spec: JobSpec = self._build_spec(JobSpec, JOB_OPTIONS, "script", self.validate, script, options)
        if spec.checkpoint_to:  # "store" needs this profile's object_store
            check_checkpoint_to(spec.checkpoint_to, self.profile)
            if (spec.array or spec.sweep) and spec.checkpoint_dir:  # no checkpoint there is one task's
                raise SpecError("checkpoint_to", "with --checkpoint-dir on an array: every task shares "
                                "that directory, so no checkpoint in it is one task's; drop "
                                "--checkpoint-dir (each task then has its own)")
        return spec

    def validate(self, spec: JobSpec) -> None:
        """Raise SpecError for a value this tier cannot run."""
        validate_spec(spec)
        if spec.checkpoint_to:
            check_checkpoint_to(spec.checkpoint_to, self.profile)

    def run_uploader(self, python: str, data: bytes) -> Iterator[bytes]:
        """Run the checkpoint uploader (s3_upload.py) where the checkpoints are, with ``data``
        (the request) on its stdin; yields its stdout. Default: on this machine."""
        import sys

        yield from local_uploader(sys.executable, data)

    def upload_checkpoint(self, record: JobRecord,
                          on_progress: Callable[[UploadReport], None] | None = None) -> UploadReport:
        """Upload (or resume uploading) a COMPLETED job's (or array task's) newest checkpoint
        (--checkpoint-to)."""
        stored = record if task_of(record) is not None else self.registry.get(record.key)
        return upload_checkpoint(self, stored, on_progress)

    def log_decoder(self, offset: int, *, skip_partial: bool = False) -> LogDecoder:
        """A decoder of this tier's merged log from a byte offset (rank-prefixed lines)."""
        return LogDecoder(offset, skip_partial=skip_partial)

    # --- what each tier implements -------------------------------------------------------
    @abc.abstractmethod
    def render(self, spec: JobSpec) -> str:
        """What would run, as text (the sbatch script; the local command plan)."""

    @abc.abstractmethod
    def submit(self, spec: JobSpec) -> Job:
        """Start a job and record it in the registry."""

    @abc.abstractmethod
    def poll_scheduler(self, records: Sequence[JobRecord]) -> dict[str, SchedulerInfo]:
        """Scheduler state of many jobs in one query. Keyed by job id; missing = unknown."""

    @abc.abstractmethod
    def poll_ranks(self, records: Sequence[JobRecord]) -> dict[str, dict[int, RankState]]:
        """Per-rank state of many jobs in one query, keyed by job id."""

    def usage_series(self, record: JobRecord, max_samples: int = USAGE_MAX_SAMPLES) -> UsageSeries:
        """The job's resource-use series as its rank shims sampled them (batch/usage.py): at most
        the last ``max_samples`` of each rank. Empty where a tier keeps none."""
        return UsageSeries()

    def accounting_record(self, record: JobRecord) -> Accounting | None:
        """What the scheduler's accounting says the job used (batch/efficiency.py); None where a
        tier keeps none (only Slurm does)."""
        return None

    def stacks(self, record: JobRecord, timeout: float = STACKS_WAIT) -> Stacks:
        """Every running rank's Python stacks (all threads), taken at one moment and grouped by
        identical stack (batch/stacks.py). One request for the whole job: a file in its job
        directory that every rank's shim looks at each second; no scheduler call. Waits at most
        ``timeout`` seconds for the ranks' answers; a rank without a stack says why."""
        if is_array(record):
            raise TiersError(f"job {record.job_id} is an array: ask one task, e.g. "
                             f"job.task(i).stacks() or %tiers stacks {record.job_id}_i")
        ranks = self.poll_ranks([record]).get(record.job_id, {})
        running = sorted(r for r, s in ranks.items() if s.phase is RankPhase.RUNNING)
        answers: dict[int, Any] = {}
        cell: str | None = None
        started = time.monotonic()
        if running:
            rid = request_id(time.time())
            self.ask_stacks(record, rid)
            while True:
                answers, cell = parse_answers(self.read_stacks(record), rid)
                if set(running) <= set(answers) or time.monotonic() - started >= timeout:
                    break
                time.sleep(0.25)
        return build_stacks(record.job_id, record.world_size, ranks, answers, running, cell,
                            waited_s=timeout)

    def ask_stacks(self, record: JobRecord, rid: str) -> None:
        """Write the request ``rid`` into the job directory's ``stacks/request``."""
        raise Unsupported(f"the {self.backend} tier cannot take a job's stacks")

    def read_stacks(self, record: JobRecord) -> str:
        """The ranks' answers as :func:`~jupyter_tiers.batch.stacks.parse_answers` reads them:
        ``@@ R`` and the tail of ``stacks/R`` per rank, then ``@@cell`` and the cell's file."""
        raise Unsupported(f"the {self.backend} tier cannot take a job's stacks")

    def rank_notes(self) -> dict[str, str]:
        """Problems the last :meth:`poll_ranks` saw, one line per job id (a full disk under the
        job directory); views show them. None by default."""
        return {}

    @abc.abstractmethod
    def open_log(self, record: JobRecord, offset: int) -> ByteStream:
        """Follow the merged log from a byte offset."""

    @abc.abstractmethod
    def read_log(self, record: JobRecord, offset: int = 0) -> bytes:
        """The merged log from a byte offset to its current end."""

    def log_chunks(self, record: JobRecord, offset: int = 0) -> Generator[bytes, None, None]:
        """The merged log from a byte offset to its end, in pieces as they are read (tiers
        override this so a large log is never whole in memory)."""
        yield self.read_log(record, offset)

    def tail_log(self, record: JobRecord, lines: int) -> bytes:
        """The merged log's last ``lines`` lines (tiers override this to avoid reading it all)."""
        if lines <= 0:
            return b""
        return b"".join(self.read_log(record, 0).splitlines(keepends=True)[-lines:])

    @abc.abstractmethod
    def log_size(self, record: JobRecord) -> int:
        """Current size of the merged log in bytes (0 before it exists)."""

    @abc.abstractmethod
    def rank_log(self, record: JobRecord, rank: int, tail: int | None = None) -> list[LogLine]:
        """One rank's lines (exact filter), optionally only the last ``tail``."""

    @abc.abstractmethod
    def cancel(self, record: JobRecord) -> None:
        """Cancel a job (no error if it already ended)."""

    def cancel_array(self, record: JobRecord, tasks: Sequence[JobRecord]) -> None:
        """Cancel every task of the array ``record`` (here one by one; a scheduler with arrays
        cancels them all at once)."""
        for task in tasks:
            self.cancel(task)

    def task_checkpoints(self, record: JobRecord, tail_lines: int = 0
                         ) -> tuple[dict[int, tuple[str, str | None]], dict[int, str] | None]:
        """Every task's checkpoint directory and newest entry (task index -> (directory, entry
        or None)) of the array ``record``, and with ``tail_lines`` each task's log tail when the
        same round trip can bring it (None: the caller reads them). :class:`Unsupported` when
        the tier cannot list them."""
        raise Unsupported(f"the {self.backend} tier cannot list an array's task checkpoints")

    def list_files(self, record: JobRecord) -> list[FileInfo]:
        """Every file the job left in its job and checkpoint directories (files.FileInfo)."""
        raise Unsupported(f"profile {self.name!r}: this tier cannot list a job's files")

    def file_chunks(self, record: JobRecord, name: str, offset: int) -> Iterator[bytes]:
        """One listed file's bytes from ``offset``, in chunks (streamed)."""
        raise Unsupported(f"profile {self.name!r}: this tier cannot fetch a job's files")

    def file_sha256(self, record: JobRecord, name: str) -> str | None:
        """The sha256 of one listed file (for a file too large for the listing to hash); None
        when it cannot be told."""
        return None

    # --- job history: a tier that keeps accounting overrides both -------------------------
    def history(self, query: HistoryQuery | None = None, **filters: Any) -> list[HistoryRow]:
        """Jobs from the scheduler's accounting, every submitter's, newest first, at most
        ``query.limit``; the ones this registry submitted are marked ``ours``. Filters (or a
        ready ``query``) as :func:`~jupyter_tiers.batch.history.make_query` takes them. Raises
        AccountingDisabled when the cluster keeps none, :class:`Unsupported` when the tier has
        no accounting at all (only Slurm has)."""
        raise Unsupported(no_history_message(self.name, self.backend))

    def output_tail(self, row: HistoryRow, lines: int = 50) -> tuple[str, str | None]:
        """The last ``lines`` of a history job's output (read-only): (the path read, its text
        or None when the file is missing or unreadable). :class:`Unsupported` as for history."""
        raise Unsupported(no_history_message(self.name, self.backend))

    def close(self) -> None:
        """Stop the watcher and drop the connection."""
        if self._watcher is not None:
            self._watcher.stop()

    # --- shared behaviour ----------------------------------------------------------------
    def status(self, records: Sequence[JobRecord]) -> dict[str, JobStatus]:
        """One-shot status of several jobs (scheduler + ranks, each batched). An array's is the
        aggregate of its tasks (asked in the same batch), its tasks' are keyed ``ID_i``."""
        arrays = {r.key: task_records(r) for r in records if is_array(r)}
        asked = [r for r in records if r.key not in arrays] + [t for ts in arrays.values() for t in ts]
        tasks_of = {t.key for ts in arrays.values() for t in ts}
        # Rank files first: a scheduler asked after them that says "pending" of a job whose
        # latest run had started tells a requeue nobody watched (merge_status).
        ranks = self.poll_ranks(asked)
        sched = self.poll_scheduler(asked)
        ended = ended_ids(sched)
        if ended:
            ranks = {**ranks, **self.poll_ranks([r for r in asked if r.job_id in ended])}
        out = {}
        for rec in asked:
            st = merge_status(rec.job_id, sched.get(rec.job_id), ranks.get(rec.job_id), rec.world_size,
                              restarts=rec.restarts, ranks_read_first=True)
            if rec.key not in tasks_of:  # an array's task has no record of its own
                self.registry.record_end(rec, st)  # before the state: its reader finds it
            self.registry.update(rec.key, state=st.state.value, nodelist=st.nodelist,
                                 restarts=st.restarts)
            out[rec.job_id] = st
        for rec in records:
            if rec.key in arrays:
                tasks = {task_index(t.job_id): out[t.job_id] for t in arrays[rec.key]}
                st = aggregate_status(rec.job_id, tasks)
                record_counts(self.registry, rec.key, st.state.value,
                              counts_text([s.state for s in tasks.values()]))
                out[rec.job_id] = st
        return out

    def refresh(self, records: Sequence[JobRecord]) -> None:
        self.status(records)

    def job(self, record: JobRecord) -> Job:
        """The handle of a job record (an ArrayJob for an array)."""
        handle = handle_for(self, record)
        assert isinstance(handle, Job)
        return handle

    def live_job_named(self, name: str) -> Job | None:
        """This profile's newest job called ``name`` while it has not ended (one status read);
        None when there is none, it ended, or its state cannot be read now."""
        record = self.registry.find_by_name(self.name, name)
        if record is None or record.kind != WorkKind.JOB:
            return None
        job = self.job(record)
        try:
            state = job.status().state
        except TiersError:
            return None
        return None if state.terminal else job


class ServeTier(Tier):
    """Base of the serving tiers: long-lived services with replicas, followed by watches.

    A service never ends by itself; ``Service.wait_ready`` waits for READY or FAILED.
    """

    #: Whether :meth:`port_forward` opens a forward this process keeps open and can name the
    #: pod of (:meth:`forwarded_pod`: Kubernetes); else the endpoint itself is the forward.
    keeps_forwards: bool = False
    #: Whether a model in the object store is fetched where the service runs (the spec's
    #: ``model_uri``: Kubernetes' init container); else --model-from brings it into this
    #: machine's model cache first (app/model_from.py).
    fetches_models: bool = False

    def make_spec(self, body: str, **options: Any) -> ServeSpec:
        """A ServeSpec from the cell body, the profile's defaults and env, then ``options``."""
        spec: ServeSpec = self._build_spec(ServeSpec, SERVE_OPTIONS, "body", self.validate, body, options)
        return spec

    def validate(self, spec: ServeSpec) -> None:
        """Raise SpecError for a value this tier cannot serve."""
        validate_serve_spec(spec)

    def refresh(self, records: Sequence[JobRecord]) -> None:
        for record in records:
            self.service_status(record)

    def service(self, record: JobRecord) -> Service:
        return Service(self, record)

    def service_named(self, name: str) -> Service:
        """This profile's service called ``name``; JobNotFound when the registry has none."""
        record = self.registry.find_by_name(self.name, name)
        if record is None or record.kind != WorkKind.SERVICE:
            raise JobNotFound(f"no service {name!r} of profile {self.name!r} in the registry")
        return self.service(record)

    @abc.abstractmethod
    def render(self, spec: ServeSpec) -> str:
        """Every object that would be applied, as YAML (never a Secret's values)."""

    def dry_run_server(self, spec: ServeSpec) -> str:
        """``--dry-run=server``: the cluster's own check of every object, creating nothing.
        Only a Kubernetes tier has an API server to ask."""
        raise TiersError(f"--dry-run=server needs a kubernetes profile; {self.name!r} is a {self.backend} "
                         "profile (plain --dry-run prints what would run)")

    @abc.abstractmethod
    def apply(self, spec: ServeSpec) -> Service:
        """Create or update the service (idempotent: an unchanged spec changes nothing)."""

    @abc.abstractmethod
    def service_status(self, record: JobRecord) -> ServiceStatus:
        """The service's status now (also recorded in the registry)."""

    @abc.abstractmethod
    def service_logs(self, record: JobRecord, pod: str | None = None, tail: int | None = None) -> str:
        """Every pod's log merged with a ``pod: `` prefix, or one pod's: at most its last
        ``tail`` lines and MAX_SERVICE_LOG_BYTES, led by a :func:`cut_marker` line when earlier
        output was left out."""

    def cause_lines(self, record: JobRecord, status: ServiceStatus) -> list[str]:
        """A failed service's failed pod's last lines (every pod's when none is known; none for
        a service that has not failed), for its summary to say why it failed."""
        if status.state is not ServiceState.FAILED:
            return []
        pod = failed_pod(status)
        try:
            text = self.service_logs(record, pod=pod, tail=CAUSE_LINES)
        except TiersError:
            return []
        return [ln if pod else ln.split(": ", 1)[-1] for ln in text.splitlines()
                if not ln.startswith(CUT_PREFIX)]

    def pod_usage(self, record: JobRecord) -> list[dict[str, Any]]:
        """The service's pods' CPU and memory now (serving/podusage.py rows). Raises Unsupported
        with one line where the tier has no such numbers (or the cluster does not serve them)."""
        raise Unsupported(f"pod CPU/memory: the {self.backend} tier of profile {self.name} does not "
                          "report them")

    @abc.abstractmethod
    def endpoint(self, record: JobRecord) -> str | None:
        """The service's URL."""

    @abc.abstractmethod
    def scale(self, record: JobRecord, replicas: int) -> None:
        """Set the number of replicas."""

    @abc.abstractmethod
    def restart(self, record: JobRecord) -> None:
        """Replace every pod with a rolling update."""

    def rollback(self, record: JobRecord, revision: int | None = None) -> str:
        """Roll back to an earlier revision (default: the previous one); a one-line message.
        Only a tier that keeps a revision history does (Kubernetes)."""
        raise Unsupported(f"service {record.name}: rollback needs a Kubernetes profile (it rolls the "
                          f"Deployment back in its ReplicaSet history); {self.name} is a "
                          f"{self.profile.tier} profile, so run the earlier cell again")

    @abc.abstractmethod
    def delete(self, record: JobRecord) -> None:
        """Remove everything the tier made for the service."""

    def promote(self, record: JobRecord) -> str:
        """Make the service's canary (``--canary``) the whole service; returns one line."""
        raise Unsupported(f"service {record.name}: {self.name} is a {self.profile.tier} profile, "
                          "which runs no canaries")

    @abc.abstractmethod
    def port_forward(self, record: JobRecord, local_port: int = 0, track: str | None = None) -> str:
        """Open a local port to a ready replica; returns its URL. ``track`` ("stable" or
        "canary", while a canary runs; None or "both": either) picks the revision it reaches."""

    def forwarded_pod(self, url: str) -> str | None:
        """The pod an open forward of this tier at ``url`` relays to (None: not one of its
        forwards, or a tier whose forward is no single pod's)."""
        return None

    def load_targets(self, record: JobRecord, track: str | None = None
                     ) -> tuple[list[str], list[str | None], str]:
        """Where a load test sends: the forwards' URLs, the pod behind each (None: the forward
        spreads over the replicas itself), and one sentence on what is measured. ``track``
        ("stable", "canary"; None: both) picks the revision. This default is the service's own
        forward."""
        url = self.port_forward(record, track=track)
        pod = self.forwarded_pod(url)
        which = f"the {track} track's" if track else "every"
        if pod is None:
            return [url], [None], f"{which} ready replica measured, through the service's own front port"
        return [url], [pod], f"ONE POD measured: {pod} (the forward goes to one pod, not the Service)"

    def close_load_targets(self, urls: Sequence[str]) -> None:
        """A load test is over: close the forwards :meth:`load_targets` opened for it only."""

    def forward_alive(self, url: str) -> bool:
        """Whether ``url`` is a forward this tier opened and still keeps open."""
        return self.forwarded_pod(url) is not None

    @abc.abstractmethod
    def watch(self, record: JobRecord, *, on_status: Callable[[ServiceStatus], None] | None = None,
              on_lines: Callable[[list[PodLogLine]], None] | None = None) -> Subscription[ServiceStatus]:
        """Deliver status changes (and pod log lines) to the callbacks until the subscription
        is closed: the status now first, then each change."""

    def unwatch(self, subscription: Subscription[ServiceStatus]) -> None:
        """Stop delivering to one ``watch`` subscription (``subscription.close()``)."""
        subscription.close()


def handle_for(tier: Tier, record: JobRecord) -> Handle:
    """The right handle for a registry record (an array's is an ArrayJob)."""
    if record.kind == WorkKind.SERVICE:
        return Service(tier, record)
    if is_array(record):
        return ArrayJob(tier, record)
    return Job(tier, record)
