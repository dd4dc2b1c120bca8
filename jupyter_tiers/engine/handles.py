"""The handles users hold: a training ``Job`` and a serving ``Service``, on one shared base.

Handles are cheap to create; all work goes through their tier. ``%tiers``, ``jupyter tiers`` and
the widgets act on any handle through the shared base (status, logs, wait, stop).
"""

from __future__ import annotations

import abc
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic

from ..batch.efficiency import Efficiency, job_efficiency
from ..batch.endreason import (
    TAIL_LINES,
    EndReason,
    LogTail,
    facts_of,
    module_names,
    needs_beside_notebook,
    why_ended,
)
from ..batch.metrics import MetricsTracker, parse_patterns, to_frame
from ..batch.stacks import STACKS_WAIT, Stacks
from ..batch.status import summary_line
from ..batch.usage import rows_frame, to_usage_frame, usage_rows
from ..config.registry import JobRecord
from ..core.errors import SpecError, TiersError
from ..core.model import JobState, JobStatus, LogLine, PodInfo, PodLogLine, ServiceStatus, WorkKind
from ..data.files import download, download_source, select
from ..serving.loadgen import LoadRun
from ..serving.loadplan import check_plan, limit_of
from ..serving.podusage import POD_USAGE_COLUMNS
from ..serving.status import check_track
from . import serve_http
from .rank_metrics import RankMetrics
from .subscription import StatusT, Subscription, wait_for

if TYPE_CHECKING:
    from ..serving.httpmodel import HttpResponse
    from .tier import BatchTier, ServeTier, Tier
    from .watch import JobSubscription


class Handle(abc.ABC, Generic[StatusT]):
    """One job or service of a tier, as recorded in the registry; ``StatusT`` is its status
    type (JobStatus or ServiceStatus)."""

    #: What kind of work this handle is on (the record's ``kind``).
    kind: ClassVar[WorkKind]

    def __init__(self, tier: Tier, record: JobRecord) -> None:
        self.tier = tier
        self.record = record

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.record.key} {self.record.name!r}>"

    @property
    def id(self) -> str:
        return self.record.job_id

    @property
    def key(self) -> str:
        """Unique across profiles: ``profile/id``."""
        return self.record.key

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def script(self) -> str:
        """What was submitted or applied, as text (no env values)."""
        return self.record.script

    def recorded(self) -> JobRecord:
        """The registry's record as it is now (``record`` is the one this handle was made with:
        a status read since may have changed its state or an array's counts)."""
        return self.tier.registry.get(self.key)

    @abc.abstractmethod
    def status(self) -> StatusT:
        """The current status, asked of the cluster now."""

    @abc.abstractmethod
    def watch(self, on_status: Callable[[StatusT], None] | None = None) -> Subscription[StatusT]:
        """Follow the status: ``on_status`` gets the status now (once known) and each change, on
        the tier's threads, until the returned subscription is closed (subscription.py); its
        ``latest`` is the last one. One protocol for jobs and services: views, the server's hub
        and :func:`~jupyter_tiers.engine.subscription.wait_for` use it whatever the handle."""

    @abc.abstractmethod
    def logs(self, *, tail: int | None = None) -> str:
        """The log as text (all ranks or all pods, merged), or only its last ``tail`` lines."""

    @abc.abstractmethod
    def wait(self, timeout: float | None = None) -> StatusT:
        """Block until the job ends / the service is ready or failed; returns the last status."""

    @abc.abstractmethod
    def stop(self) -> str:
        """Cancel the job / delete the service; returns a line saying what was done."""


class Job(Handle[JobStatus]):
    """Handle on one submitted training job."""

    kind = WorkKind.JOB
    tier: BatchTier

    def status(self) -> JobStatus:
        """Current status: one scheduler query and one read of the rank files."""
        return self.tier.status([self.record])[self.record.job_id]

    def logs(self, rank: int | None = None, tail: int | None = None) -> str:
        """The log as text: all ranks with ``"R: "`` prefixes, or one rank's lines without."""
        if rank is not None:
            return "".join(ln.text + "\n" for ln in self.tier.rank_log(self.record, rank, tail))
        if tail is not None:
            return self.tier.tail_log(self.record, tail).decode("utf-8", errors="replace")
        return "".join(self.iter_logs())

    def iter_logs(self, offset: int = 0) -> Iterator[str]:
        """The merged log from byte ``offset`` to its current end, as pieces of text in order
        (``"R: "`` prefixes kept): print or scan a log of any size without holding it all."""
        import codecs

        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        for chunk in self.tier.log_chunks(self.record, offset):
            text = decoder.decode(chunk)
            if text:
                yield text
        text = decoder.decode(b"", final=True)
        if text:
            yield text

    def metric_patterns(self) -> tuple[tuple[str, str], ...]:
        """The job's custom metric patterns (``--metrics``, or its profile's ``metrics``)."""
        spec = self.record.spec if isinstance(self.record.spec, dict) else {}
        try:
            return parse_patterns(spec.get("metrics") or ())
        except SpecError:  # a record written by another version: the defaults still work
            return ()

    def metric_tracker(self, rank: int | None = 0, *, tail: LogTail | None = None) -> MetricsTracker:
        """The log so far, read once as a stream (never whole in memory): ``rank``'s metric
        series (bounded) and the first error line; ``tail`` also keeps every rank's last lines."""
        tracker = MetricsTracker(self.metric_patterns(), rank=rank)
        rest = ""
        for piece in self.iter_logs():
            rest += piece
            cut = rest.rfind("\n")
            if cut >= 0:
                tracker.feed_text(rest[: cut + 1])
                if tail is not None:
                    tail.feed_text(rest[: cut + 1])
                rest = rest[cut + 1:]
            elif len(rest) > 1 << 20:  # a progress bar that never ends its line
                tracker.feed_text(rest)
                if tail is not None:
                    tail.feed_text(rest)
                rest = ""
        if rest:
            tracker.feed_text(rest)
            if tail is not None:
                tail.feed_text(rest)
        return tracker

    def metrics(self, rank: int | None = 0) -> Any:
        """Metric series from the log so far (rank 0's by default; see jupyter_tiers.batch.metrics):
        a pandas DataFrame, one column per metric indexed by step, when pandas is installed;
        otherwise ``{metric: [(step, value), ...]}``. Long series are downsampled."""
        return to_frame(self.metric_tracker(rank).to_lists())

    def usage(self, rank: int | None = None) -> Any:
        """What each rank used, as its rank shim sampled it on every heartbeat (CPU % of its
        process tree, 100 = one core; RSS; GPU utilisation and memory where the node has
        ``nvidia-smi``, else None): one row per sample with the columns ``time, rank, node,
        cpu_pct, cpu_s, rss_mib, gpu_util, gpu_mem_mib``, ``rank`` alone or every rank. A
        pandas DataFrame when pandas is installed (``time`` as UTC datetimes), otherwise the
        rows as dicts (like :meth:`metrics`). Read in one command; the scheduler is not asked."""
        rows = usage_rows(self.tier.usage_series(self.record))
        if rank is not None:
            rows = [r for r in rows if r["rank"] == rank]
        return to_usage_frame(rows)

    def efficiency(self, status: JobStatus | None = None, *, accounting: bool = True) -> Efficiency | None:
        """What the job used of what it asked for, like ``seff``: CPU time over the cores and the
        elapsed time, the largest node's memory peak against ``--mem``, GPU use where sampled
        (``str()`` is ``CPU 38 % of 16 cores over 2 h 10 min; memory peak 2.1 of 16 GB per
        node``, with a hint when it asked for far more than it used). From the ranks' samples
        (one read of ``usage/``) and, with ``accounting`` on an ended Slurm job, its sacct
        record (one query). None when nothing was sampled (a job shorter than a heartbeat)."""
        status = status or self.status()
        acct = self.tier.accounting_record(self.record) if accounting and status.state.terminal else None
        return job_efficiency(self.record.spec, self.record.tier, self.record.world_size,
                              status.elapsed_s, self.tier.usage_series(self.record), acct)

    def summary(self, status: JobStatus | None = None) -> str:
        """The one-line summary with what the log shows: the main metric's last value and,
        for a job that did not complete, why it ended with the fix (``why: … — fix: …``), else
        its first error line (reads the log once)."""
        status = status or self.status()
        tail = LogTail()
        tracker = self.metric_tracker(tail=tail)
        reason = self.end_reason(status, tail=tail, last_step=tracker.step)
        used = self.efficiency(status, accounting=False) if status.state.terminal else None
        return summary_line(status, metric=tracker.main(), error=tracker.error,
                            why=reason.line if reason else None, used=used.for_summary if used else None)

    def end_reason(self, status: JobStatus | None = None, *, tail: LogTail | None = None,
                   last_step: float | None = None) -> EndReason | None:
        """Why the job ended and what to change (jupyter_tiers.batch.endreason), or None for a
        job that completed, still runs, or ended in a way not recognised. Reads the log once
        unless ``tail`` (the log's last lines per rank) is given, and, for a job the lines or the
        state say was killed for memory, its MaxRSS from the scheduler's accounting."""
        status = status or self.status()
        if not status.state.terminal or status.state is JobState.COMPLETED:
            return None
        if tail is None:  # only the log's end: the merged tail, and the failing rank's own
            tail = LogTail()
            tail.feed_text(self.tier.tail_log(self.record, 4 * TAIL_LINES).decode("utf-8", errors="replace"))
            first = status.first_failure
            rank = first.rank if first is not None else 0
            tracker = MetricsTracker(self.metric_patterns(), rank=rank)
            for line in self.tier.rank_log(self.record, rank, TAIL_LINES):
                tail.feed(rank, line.text)
                tracker.feed_line(line.text, rank)
            last_step = tracker.step if last_step is None else last_step
        return end_reason_of(self, status, tail, last_step)

    def watch(self, on_status: Callable[[JobStatus], None] | None = None, *,
              on_lines: Callable[[Sequence[LogLine]], None] | None = None,
              on_end: Callable[[JobStatus], None] | None = None,
              log_offset: int = 0, skip_partial: bool = False,
              metrics: RankMetrics | None = None) -> JobSubscription:
        """Follow the job through its tier's watcher (one batched query for all its jobs): the
        status as :meth:`Handle.watch`; with ``on_lines`` the log from byte ``log_offset``
        (``skip_partial``: drop the first, cut line), nothing lost or repeated across a dropped
        connection; ``on_end`` once the job has ended and the rest of its log (and, with
        ``--checkpoint-to``, its checkpoint's upload) is through. ``metrics``
        (:meth:`live_metrics`): the log's metric points, fed each batch before ``on_lines``."""
        return self.tier.watch(self.record, on_status=on_status, on_lines=on_lines, on_end=on_end,
                               log_offset=log_offset, skip_partial=skip_partial, metrics=metrics)

    def live_metrics(self, max_points: int = 200) -> RankMetrics:
        """An empty :class:`~jupyter_tiers.engine.rank_metrics.RankMetrics` with this job's metric
        patterns, for :meth:`watch` to fill as it follows the log (a view reads it)."""
        return RankMetrics(self.metric_patterns(), max_points=max_points)

    def wait(self, timeout: float | None = None) -> JobStatus:
        """Block until the job ends (or ``timeout`` seconds pass); returns the last status."""
        # --checkpoint-to: the job's end is after its checkpoint's upload (the subscription's end).
        uploads = isinstance(self.record.spec, dict) and bool(self.record.spec.get("checkpoint_to"))
        last = wait_for(self, lambda status: status.state.terminal and not uploads, timeout)
        return last if last is not None else self.status()

    def follow(self, offset: int = 0, timeout: float | None = None) -> Iterator[LogLine]:
        """Yield log lines as they are written until the job ends (resumes from ``offset``)."""
        import queue

        q: queue.Queue[LogLine | None] = queue.Queue()

        def on_lines(lines: Sequence[LogLine]) -> None:
            for line in lines:
                q.put(line)

        sub = self.watch(on_lines=on_lines, on_end=lambda status: q.put(None), log_offset=offset)
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                item = q.get(timeout=remaining)
                if item is None:
                    return
                yield item
        finally:
            sub.close()

    def files(self, pattern: str = "*") -> list[Any]:
        """What the job left in its job directory and checkpoint directory (``checkpoints/...``),
        matching the glob ``pattern`` (on the name or the base name): ``FileInfo(name, size,
        mtime)`` in one remote command, e.g. ``job.files("*.png")``."""
        return select(self.tier.list_files(self.record), pattern)

    def download(self, pattern: str = "*", dest: str = ".", *,
                 progress: Callable[[str, int, int], None] | None = None,
                 overwrite: bool = False) -> list[Any]:
        """Fetch the files matching ``pattern`` into ``dest`` (default: the notebook's
        directory) over the tier's connection: streamed (bounded memory), resumable (a cut
        leaves NAME.part, the next call continues from it while the remote file is the same),
        never outside ``dest``. A local file with the same sha256 is kept ("already up to
        date"); one with other content is never replaced silently: the file is saved as
        ``NAME (1).ext`` unless ``overwrite=True``. Returns one ``files.Downloaded`` per file
        (``path``, ``outcome``, ``note`` saying what happened; usable as a path); TiersError
        when nothing matches."""
        matching = self.files(pattern)
        if not matching:
            raise TiersError(f"job {self.id}: no file matches {pattern!r}; job.files() lists them")
        return download(matching, dest,
                        lambda name, offset: self.tier.file_chunks(self.record, name, offset), progress,
                        overwrite=overwrite, digest=lambda name: self.tier.file_sha256(self.record, name),
                        source=download_source(self.tier.name, self.record))

    def cancel(self) -> None:
        self.tier.cancel(self.record)
        self.tier.watcher.kick()

    def stacks(self, timeout: float = STACKS_WAIT) -> Stacks:
        """Every running rank's Python stack (all threads), taken at one moment and grouped by
        identical stack: ``print(job.stacks())`` shows ``ranks 0-2,4-7 (7) on node[1-2]`` and
        the frames, innermost last, the cell's frames as the cell's lines; a rank without a
        stack says why in one line. One request for the whole job, no scheduler call; waits at
        most ``timeout`` seconds for the ranks to answer (they look once a second)."""
        return self.tier.stacks(self.record, timeout=timeout)

    def upload(self) -> str:
        """Upload (or finish uploading: finished files and parts are not sent again) the newest
        checkpoint of this COMPLETED job to its ``--checkpoint-to``; returns the checkpoint's
        URI. Raises a one-line TiersError (missing bucket, access denied, no boto3 on the
        cluster) otherwise."""
        report = self.tier.upload_checkpoint(self.record)
        return str(report.done_uri)

    def stop(self) -> str:
        self.cancel()
        return f"cancel requested for job {self.id} ({self.name})"


class Service(Handle[ServiceStatus]):
    """Handle on one service (a Deployment + Service on Kubernetes, or local replicas)."""

    kind = WorkKind.SERVICE
    tier: ServeTier
    #: The last load test's run (loadgen.LoadRun, from :meth:`load_test` or
    #: :meth:`start_load_test`), for its summary and series.
    last_load_test: Any = None

    def status(self) -> ServiceStatus:
        """Current status: the Deployment, its pods and their recent Warning events."""
        return self.tier.service_status(self.record)

    def watch(self, on_status: Callable[[ServiceStatus], None] | None = None, *,
              on_lines: Callable[[list[PodLogLine]], None] | None = None) -> Subscription[ServiceStatus]:
        """Follow the service through its tier's watch (Kubernetes: the namespace's shared
        watches; local: the service's files): the status as :meth:`Handle.watch`; with
        ``on_lines`` every pod's log lines as they come (``PodLogLine``, across restarts)."""
        return self.tier.watch(self.record, on_status=on_status, on_lines=on_lines)

    def pods(self) -> tuple[PodInfo, ...]:
        return self.status().pods

    def usage(self) -> Any:
        """Each pod's containers' CPU (cores) and memory (MiB) now, from the cluster's resource
        metrics API (``metrics.k8s.io``): a pandas DataFrame when pandas is installed, else rows.
        Raises Unsupported with one line where the API is not served (no metrics-server)."""
        return rows_frame(self.tier.pod_usage(self.record), POD_USAGE_COLUMNS)

    def logs(self, pod: str | None = None, tail: int | None = None) -> str:
        """Every pod's log merged with a ``pod-name:`` prefix on each line, or one pod's without."""
        return self.tier.service_logs(self.record, pod=pod, tail=tail)

    @property
    def url(self) -> str | None:
        """The endpoint inside the cluster (``http://NAME.NAMESPACE.svc:PORT``)."""
        return self.tier.endpoint(self.record)

    def scale(self, replicas: int) -> None:
        self.tier.scale(self.record, replicas)

    def restart(self) -> None:
        """Roll every pod (a rollout restart)."""
        self.tier.restart(self.record)

    def rollback(self, revision: int | None = None) -> str:
        """While a canary runs (``--canary``): remove it, the stable revision taking its replicas
        back. Otherwise roll back to ``revision`` of the Deployment's history (default: the
        previous one), as ``kubectl rollout undo`` does, with that revision's cell body (Kubernetes
        rolling services only; running the cell again rolls forward). Returns one line."""
        return self.tier.rollback(self.record, revision)

    def delete(self) -> None:
        """Remove everything the tier made for this service (Secret and ConfigMap included)."""
        self.tier.delete(self.record)

    def stop(self) -> str:
        self.delete()
        return f"service {self.name} deleted"

    def promote(self) -> str:
        """Make the canary (``%%k8s_serve --canary``) the whole service: a rolling update of
        every replica to the canary's revision; the canary's own objects go. Returns one line."""
        return self.tier.promote(self.record)

    def port_forward(self, local_port: int = 0, track: str | None = None) -> str:
        """Open a local port to a ready pod; returns ``http://127.0.0.1:PORT``. It stays open
        while this process lives, until its tier closes (:func:`jupyter_tiers.api.close_all`).
        While a canary runs, ``track="stable"`` or ``"canary"`` reaches that revision's pods
        only (None or "both": any ready pod of either)."""
        if track is None:
            return self.tier.port_forward(self.record, local_port)
        return self.tier.port_forward(self.record, local_port, track=track)

    def forward(self) -> serve_http.Forward:
        """What the request path (serve_http.py, the load test) needs of this service: its name,
        key, tier and how to open a forward, e.g. ``serve_http.forward_url(svc.forward())``."""
        return serve_http.Forward(name=self.name, key=self.record.key, tier=self.tier,
                                  open=lambda track: self.port_forward(track=track),
                                  current=lambda: self.tier.endpoint(self.record))

    def request(self, method: str, path: str, *, json: Any = None, body: str | bytes | None = None,
                headers: Any = None, timeout: float = 30.0, track: str | None = None) -> HttpResponse:
        """Send one HTTP request to the service through its forward (the port-forward on
        Kubernetes, opened on first use and reused; the front port on the local tier) and
        return the response: ``status``, ``headers``, ``body``/``text``/``json()``, ``ttfb``
        and ``total`` seconds, ``answered_by`` (the pod or replica, when a response header or
        the forward says). ``json`` (any JSON value but None, sent as application/json) or
        ``body`` (text or bytes); ``headers`` a dict. Only a path is given: the host is always
        the service's own forward. ``timeout``: seconds to connect and between two reads.
        ``track`` ("stable" or "canary", while a canary runs): only that revision's pods answer,
        so the canary can be tried before :meth:`promote` (None or "both": either)."""
        return serve_http.request(self.forward(), method, path, json=json, body=body, headers=headers,
                                  timeout=timeout, track=track)

    def models(self, timeout: float = 10.0, track: str | None = None) -> list[str]:
        """The model ids of an OpenAI-compatible server (``GET /v1/models``); TiersError if the
        server does not answer that. ``track`` as in :meth:`request`."""
        return serve_http.models(self.forward(), timeout=timeout, track=track)

    def chat(self, messages: Any, *, model: str | None = None, stream: bool = True,
             timeout: float = 300.0, track: str | None = None, **params: Any) -> serve_http.ChatStream:
        """Ask an OpenAI-compatible server (``/v1/chat/completions``): an iterator of the
        answer's text pieces as they arrive (Server-Sent Events; one piece when ``stream`` is
        False). ``messages``: a text or ``[{"role": ..., "content": ...}]``; ``params``:
        max_tokens, temperature, top_p, seed, stop, ... The iterator's ``stats`` has the time
        to first token and pieces per second; ``text`` the answer so far. ``track`` ("stable"
        or "canary") asks that revision only while a canary runs, e.g. ``svc.chat("hi",
        track="canary")``."""
        return serve_http.chat(self.forward(), messages, model=model, stream=stream, timeout=timeout,
                               track=track, **params)

    def wait_ready(self, timeout: float | None = None) -> ServiceStatus:
        """Block until the service is ready, has failed or is gone; returns the last status.

        A settled status from the watch is confirmed with a fresh read: the watch's cache may not
        have seen a change made just before (``scale(3)`` then ``wait_ready()`` would otherwise
        return the old READY 2/2 at once)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.watch() as sub:
            confirmed = 0  # statuses delivered and checked by a fresh read
            while True:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                last = wait_for(sub, lambda status: status.state.settled, remaining, after=confirmed)
                if last is None or not last.state.settled or sub.delivered <= confirmed:
                    break  # timed out (or the watch ended with nothing new)
                confirmed = sub.delivered
                fresh = self.status()
                if fresh.state.settled:
                    return fresh
        return last if last is not None and not last.state.settled else self.status()  # timed out

    def wait(self, timeout: float | None = None) -> ServiceStatus:
        return self.wait_ready(timeout)

    # --- load test (loadplan.py, loadgen.py) -------------------------------------------------
    def start_load_test(self, rps: float = 50, seconds: float = 60, concurrency: int = 16,
                        request: Any = None, *, timeout: float = 30.0,
                        on_update: Callable[[dict[str, Any]], None] | None = None,
                        track: str | None = None) -> Any:
        """Start a load test on a thread and return its ``loadgen.LoadRun`` (``stop()``,
        ``wait()``, ``summary()``, ``result()``); :meth:`load_test` is the blocking form. The
        service's ready replicas are followed through the tier's status watch for as long as
        the run lasts."""
        plan = check_plan(rps, seconds, concurrency, request, limit_rps=limit_of(self.tier.profile.settings),
                          profile=self.tier.name, timeout=timeout)
        # The service's own forwards (one per ready pod of the track on Kubernetes): the only places
        # the load goes.
        urls, pods, measured = self.tier.load_targets(self.record, check_track(track))
        try:
            run = LoadRun(urls, plan, on_update=on_update, pods=pods, measured=measured)
        except BaseException:
            self.tier.close_load_targets(urls)
            raise
        self.last_load_test = run
        status = self.status()
        def note(s: ServiceStatus) -> None:
            run.note_replicas(s.ready, s.desired, s.canary.pods if s.canary is not None else ())

        note(status)
        sub = self.watch(note)

        def unwatch_when_done() -> None:
            run.wait()
            sub.close()
            self.tier.close_load_targets(urls)

        run.start()
        try:
            threading.Thread(target=unwatch_when_done, name="jt-load-unwatch", daemon=True).start()
        except BaseException:  # an interrupt right here must not leave the load running
            run.stop()
            raise
        return run

    def load_test(self, rps: float = 50, seconds: float = 60, concurrency: int = 16,
                  request: Any = None, *, timeout: float = 30.0,
                  on_update: Callable[[dict[str, Any]], None] | None = None,
                  track: str | None = None) -> Any:
        """Send ``rps`` requests a second for ``seconds`` to the service's own forward, open loop
        (each at its scheduled time, whatever earlier ones are doing), at most ``concurrency`` in
        flight; a request that finds them all busy at its time is not sent and counted as
        dropped. ``request``: a path (``"/health"``), ``"POST /path"`` or ``{"method", "path",
        "headers", "body" | "json"}`` (default ``GET /``). ``rps`` is bounded by the profile's
        ``load_limit_rps`` (default 200). ``track`` ("stable" or "canary", while a canary runs)
        loads that revision's pods only. Blocks until done; an interrupt (the kernel's stop
        button, Ctrl-C) ends it early and the rows so far are returned.

        Returns one row per scheduled request (``scheduled``, ``start``, ``ttfb``, ``end``,
        ``latency`` in seconds from the start, ``status``, ``error``, ``late``, ``ready``: the
        ready replicas then) as a pandas DataFrame when pandas is installed, else a list of
        dicts. ``svc.last_load_test`` keeps the run: ``.summary()`` (counts, achieved rps,
        p50/p95/p99, error rate) and ``.series.rows(False)`` (per second, with ready replicas)."""
        run = self.start_load_test(rps, seconds, concurrency, request, timeout=timeout, on_update=on_update,
                                   track=track)
        try:
            while not run.wait(0.1):
                pass
        except KeyboardInterrupt:
            run.stop()
        return run.result()

    @property
    def yaml(self) -> str:
        """Every object as applied, as YAML (no Secret values)."""
        return self.record.script


def end_reason_of(job: Job, status: JobStatus, tail: LogTail, last_step: float | None) -> EndReason | None:
    """:func:`why_ended` over the failing rank's last lines in ``tail``, with the facts only
    this process can add: the notebook folder's module names (for a ModuleNotFoundError) and
    the job's MaxRSS (for a memory kill). Never raises for a fact it cannot get."""
    first = status.first_failure
    lines = tail.lines_of(first.rank if first is not None else None)
    beside: frozenset[str] = frozenset()
    if needs_beside_notebook(lines):
        try:
            with os.scandir(".") as entries:
                beside = module_names((e.name, e.is_dir()) for e in entries)
        except OSError:
            pass
    facts = facts_of(status, job.record.spec, last_step=last_step, beside_notebook=beside)
    found = why_ended(lines, facts)
    if found is not None and found.why.startswith("killed by Slurm") and facts.max_rss is None:
        rss = _max_rss(job)
        if rss is not None:
            found = why_ended(lines, facts_of(status, job.record.spec, last_step=last_step,
                                              beside_notebook=beside, max_rss=rss))
    return found


def _max_rss(job: Job) -> int | None:
    """The job's MaxRSS from accounting (bytes), None where there is none."""
    try:
        rows = job.tier.history(job=job.record.job_id, days=366, user="all")
    except TiersError:
        return None
    return next((r.max_rss for r in rows if r.max_rss is not None), None)
