"""The tier API every backend implements, and the Job handle users hold.

A tier is one connection to one cluster (or the local machine), shared by every job of its
profile. The Watcher (watch.py) drives a tier through three batched calls: ``poll_scheduler``,
``poll_ranks`` and ``open_log``; magics, widgets and the server only talk to this API.
"""

from __future__ import annotations

import abc
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .config import Profile
from .errors import SpecError
from .model import JobSpec, JobStatus, LogLine, RankState, SchedulerInfo
from .registry import JobRecord, Registry

if TYPE_CHECKING:
    from .watch import Watcher


class ByteStream(Protocol):
    """A live byte stream (a followed log): iterate for chunks, close to stop."""

    def __iter__(self) -> Iterator[bytes]: ...

    def close(self) -> None: ...


SPEC_FIELDS = {f for f in JobSpec.__dataclass_fields__ if f not in ("script", "metadata")}


class Tier(abc.ABC):
    """Base of the Slurm and local tiers."""

    kind: str = ""

    def __init__(self, profile: Profile, registry: Registry | None = None) -> None:
        self.profile = profile
        self._registry = registry
        self._watcher: Watcher | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.profile.name

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            self._registry = Registry()
        return self._registry

    @property
    def watcher(self) -> Watcher:
        """The one watcher of this tier (started on first use)."""
        with self._lock:
            if self._watcher is None:
                from .watch import Watcher

                self._watcher = Watcher(self, **self.watcher_options())
            return self._watcher

    def watcher_options(self) -> dict[str, Any]:
        return {}

    def make_spec(self, script: str, **options: Any) -> JobSpec:
        """A JobSpec from the cell body, the profile's defaults, setup and env, then ``options``.

        ``env`` in options is merged over the profile's env; ``setup`` is appended to it.
        """
        unknown = set(options) - SPEC_FIELDS
        if unknown:
            raise SpecError(sorted(unknown)[0], f"unknown option; known: {', '.join(sorted(SPEC_FIELDS))}")
        values = self._checked_defaults()
        env = dict(self.profile.env)
        env.update(dict(options.pop("env", ()) or ()))
        setup = (*self.profile.setup, *tuple(options.pop("setup", ()) or ()))
        extra = tuple(values.pop("sbatch_options", ())) + tuple(options.pop("sbatch_options", ()) or ())
        values.update({k: v for k, v in options.items() if v is not None})
        return JobSpec(
            script=script, env=tuple(env.items()), setup=setup, sbatch_options=extra,
            **_stringly(values),
        )

    def _checked_defaults(self) -> dict[str, Any]:
        """The profile's defaults as JobSpec values; a bad one is blamed on the profile file, not
        on the magic option the user did not type."""
        from .config import ConfigError
        from .slurm.render import validate_spec

        values = {k: tuple(v) if isinstance(v, list) else v for k, v in self.profile.defaults.items()}
        try:
            validate_spec(JobSpec(script="", **_stringly(values)))
        except SpecError as exc:
            source = self.profile.sources[-1] if self.profile.sources else "tiers.yaml"
            key = f"profiles.{self.name}.defaults.{exc.field.split()[0]}"
            raise ConfigError(source, key, exc.problem) from None
        return values

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

    @abc.abstractmethod
    def open_log(self, record: JobRecord, offset: int) -> ByteStream:
        """Follow the merged log from a byte offset."""

    @abc.abstractmethod
    def read_log(self, record: JobRecord, offset: int = 0) -> bytes:
        """The merged log from a byte offset to its current end."""

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

    def close(self) -> None:
        """Stop the watcher and drop the connection."""
        if self._watcher is not None:
            self._watcher.stop()

    # --- shared behaviour ----------------------------------------------------------------
    def status(self, records: Sequence[JobRecord]) -> dict[str, JobStatus]:
        """One-shot status of several jobs (scheduler + ranks, each batched)."""
        from .status import merge_status

        sched = self.poll_scheduler(records)
        ranks = self.poll_ranks(records)
        out = {}
        for rec in records:
            st = merge_status(rec.job_id, sched.get(rec.job_id), ranks.get(rec.job_id), rec.world_size)
            self.registry.update(rec.key, state=st.state.value, nodelist=st.nodelist)
            out[rec.job_id] = st
        return out

    def job(self, record: JobRecord) -> Job:
        return Job(self, record)

    def attach(self, ref: str) -> Job:
        """A handle on a job recorded in the registry (``job_id`` or ``profile/job_id``)."""
        return Job(self, self.registry.get(ref, profile=self.name))


class Job:
    """Handle on one submitted job. Cheap to create; all work goes through its tier."""

    def __init__(self, tier: Tier, record: JobRecord) -> None:
        self.tier = tier
        self.record = record

    def __repr__(self) -> str:
        return f"<Job {self.record.key} {self.record.name!r}>"

    @property
    def id(self) -> str:
        return self.record.job_id

    @property
    def key(self) -> str:
        return self.record.key

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def script(self) -> str:
        """The rendered job script, as submitted (no env values)."""
        return self.record.script

    def status(self) -> JobStatus:
        """Current status: one scheduler query and one read of the rank files."""
        return self.tier.status([self.record])[self.record.job_id]

    def logs(self, rank: int | None = None, tail: int | None = None) -> str:
        """The log as text: all ranks with ``"R: "`` prefixes, or one rank's lines without."""
        if rank is not None:
            return "".join(ln.text + "\n" for ln in self.tier.rank_log(self.record, rank, tail))
        if tail is not None:
            return self.tier.tail_log(self.record, tail).decode("utf-8", errors="replace")
        return self.tier.read_log(self.record, 0).decode("utf-8", errors="replace")

    def wait(self, timeout: float | None = None) -> JobStatus:
        """Block until the job ends (or ``timeout`` seconds pass); returns the last status."""
        done = threading.Event()
        last: list[JobStatus] = []

        def on_status(status: JobStatus) -> None:
            last[:] = [status]
            if status.state.terminal:
                done.set()

        sub = self.tier.watcher.watch(self.record, on_status=on_status, follow_logs=False)
        try:
            done.wait(timeout)
        finally:
            self.tier.watcher.unwatch(sub)
        return last[0] if last else self.status()

    def follow(self, offset: int = 0, timeout: float | None = None) -> Iterator[LogLine]:
        """Yield log lines as they are written until the job ends (resumes from ``offset``)."""
        import queue

        q: queue.Queue[LogLine | None] = queue.Queue()
        def on_lines(lines: list[LogLine]) -> None:
            for line in lines:
                q.put(line)

        sub = self.tier.watcher.watch(
            self.record,
            on_lines=on_lines,
            on_end=lambda status: q.put(None),
            log_offset=offset,
        )
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                item = q.get(timeout=remaining)
                if item is None:
                    return
                yield item
        finally:
            self.tier.watcher.unwatch(sub)

    def cancel(self) -> None:
        self.tier.cancel(self.record)
        self.tier.watcher.kick()


def _stringly(values: dict[str, Any]) -> dict[str, Any]:
    """YAML may give numbers for fields Slurm takes as text (``time: 30``, ``gpus_per_node: 8``)."""
    return {k: str(v) if k in ("gpus_per_node", "mem", "time") and v is not None else v
            for k, v in values.items()}
