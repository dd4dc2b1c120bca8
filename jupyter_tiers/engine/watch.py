"""One watcher per batch tier: batched status polling and log following, delivered to each
listener's :class:`JobSubscription` (the watch protocol of subscription.py).

The scheduler is asked about every watched job of the tier in one query, every
``status_interval`` seconds in steady state (15 s: 4 queries a minute however many jobs), sooner
with backoff after a submit, a cancel or a rank's exit. Rank state comes from the job's own files
over the existing connection every ``rank_interval`` seconds, so a rank's change shows within about
a second without loading the scheduler. Logs are followed by byte offset; a dropped connection
resumes where it stopped, with no line lost or repeated.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from time import time as wall_clock
from typing import Protocol

from ..batch.arrays import expand_arrays, is_array, merge_array_status, record_counts
from ..batch.hang import HangRule, HangWatch
from ..batch.logs import ByteStream, LogDecoder
from ..batch.status import ended_ids, merge_status
from ..batch.straggler import StragglerRule, StragglerWatch
from ..config.registry import JobRecord, Registry
from ..core.errors import ControllerUnreachable, TiersError
from ..core.model import JobState, JobStatus, LogLine, RankPhase, RankState, SchedulerInfo
from ..core.profile import Profile
from ..core.reachability import backoff_delay, is_stale, last_seen, reconnecting, stale_after
from ..data import checkpoint_upload
from ..data.checkpoint_upload import UploadError, UploadingTier, recorded_upload, shown_checkpoint, target_uri
from ..data.handoff import decode_detail
from ..data.objectstore import UploadReport
from .rank_metrics import RankMetrics
from .subscription import Subscription

log = logging.getLogger(__name__)

StatusCallback = Callable[[JobStatus], None]
# Lines come as a LogBatch (a Sequence[LogLine] kept as bytes until used; see logs.py).
LinesCallback = Callable[[Sequence[LogLine]], None]


class WatchSource(UploadingTier, Protocol):
    """What the Watcher needs of a batch tier (BatchTier is one): the three batched reads, the
    log, where to record what it saw, and what a completed job's upload asks. The watcher never
    imports the tier contract."""

    @property
    def name(self) -> str: ...

    @property
    def profile(self) -> Profile: ...

    @property
    def registry(self) -> Registry: ...

    def poll_scheduler(self, records: Sequence[JobRecord]) -> dict[str, SchedulerInfo]: ...

    def poll_ranks(self, records: Sequence[JobRecord]) -> dict[str, dict[int, RankState]]: ...

    def rank_notes(self) -> dict[str, str]: ...

    def open_log(self, record: JobRecord, offset: int) -> ByteStream: ...

    def read_log(self, record: JobRecord, offset: int = 0) -> bytes: ...

    def log_decoder(self, offset: int, *, skip_partial: bool = False) -> LogDecoder: ...


class JobSubscription(Subscription[JobStatus]):
    """One listener on one job (subscription.py's protocol), from :meth:`Watcher.watch`: its
    statuses, its log lines (``on_lines``, from a follower of its own) and ``on_end``, called
    once the job has ended and the rest of its log (and its checkpoint's upload) is through."""

    def __init__(self, record: JobRecord, on_status: StatusCallback | None = None,
                 on_lines: LinesCallback | None = None, on_end: StatusCallback | None = None) -> None:
        super().__init__(record, on_status)
        self.on_lines = on_lines
        self.on_end = on_end
        self.follower: LogFollower | None = None
        self.watcher: Watcher | None = None  # set by Watcher.watch
        self.ending = False  # the end is on its way (Watcher._end)

    def _detach(self) -> None:
        if self.watcher is not None:
            self.watcher._forget(self)
        if self.follower is not None:
            self.follower.stop()


@dataclass(eq=False)
class _Watched:
    record: JobRecord
    subs: list[JobSubscription] = field(default_factory=list)
    status: JobStatus | None = None  # as shown (UNKNOWN once the cluster has been gone too long)
    stragglers: StragglerWatch | None = None  # its ranks' progress (made on the first rank poll)
    hang: HangWatch | None = None  # its quiet time (batch/hang.py; made on the first rank poll)
    real: JobStatus | None = None  # as last merged from what the cluster said


def _safe_call(fn: Callable[..., object] | None, *args: object) -> None:
    if fn is None:
        return
    try:
        fn(*args)
    except Exception:  # a broken listener must not stop the watcher
        log.exception("jupyter-tiers listener failed")


def deliver_batch(lines: Sequence[LogLine], on_lines: LinesCallback,
                  metrics: RankMetrics | None = None) -> None:
    """One batch of a followed log to its listener: ``metrics`` reads it first, so the points
    are parsed once, from every line, whatever the listener keeps of the batch."""
    if lines:
        if metrics is not None:
            _safe_call(metrics.feed_batch, lines)
        _safe_call(on_lines, lines)


class LogFollower:
    """Follows one job's merged log from a byte offset on its own thread. With ``metrics``,
    each batch is fed to it before ``on_lines`` gets the batch (rank_metrics.py: the log's metric
    points parsed once, where it is read), and what it kept is parsed at the log's end."""

    def __init__(
        self,
        tier: WatchSource,
        record: JobRecord,
        offset: int,
        on_lines: LinesCallback,
        *,
        skip_partial: bool = False,
        max_backoff: float = 10.0,
        metrics: RankMetrics | None = None,
    ) -> None:
        self.tier = tier
        self.record = record
        self.decoder = tier.log_decoder(offset, skip_partial=skip_partial)
        self.on_lines = on_lines
        self.metrics = metrics
        if metrics is not None:
            metrics.start_at(offset)
        self.max_backoff = max_backoff
        self.reconnects = 0
        self._finishing = threading.Event()
        self._closed = threading.Event()
        self._drain_at_end = True  # False once stopped: the listener went away
        self._stream: ByteStream | None = None
        self._stream_lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._run, name=f"jt-log-{record.key}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    @property
    def offset(self) -> int:
        return self.decoder.offset

    def _emit(self, lines: Sequence[LogLine]) -> None:
        deliver_batch(lines, self.on_lines, self.metrics)

    def _run(self) -> None:
        backoff = 0.2
        while not self._finishing.is_set():
            try:
                stream = self.tier.open_log(self.record, self.decoder.received)
                with self._stream_lock:
                    self._stream = stream
                if self._finishing.is_set():
                    stream.close()
                    break
                for chunk in stream:
                    self._emit(self.decoder.feed(chunk))
                    backoff = 0.2
            except TiersError as exc:
                log.debug("log stream of %s dropped: %s", self.record.key, exc)
            except Exception as exc:  # transport errors are TiersError; anything else: retry too
                log.debug("log stream of %s failed: %r", self.record.key, exc)
            finally:
                with self._stream_lock:
                    self._stream = None
            if self._finishing.wait(backoff):
                break
            self.reconnects += 1
            backoff = min(self.max_backoff, backoff * 2)
        if self._drain_at_end:
            self._drain()
        self._closed.set()

    def _drain(self) -> None:
        """Read what the stream had not delivered yet; the job is over, so this is the end."""
        for attempt in range(5):
            try:
                rest = self.tier.read_log(self.record, self.decoder.received)
            except Exception as exc:
                log.debug("final log read of %s failed: %r", self.record.key, exc)
                time.sleep(min(self.max_backoff, 0.5 * 2**attempt))
                continue
            self._emit(self.decoder.feed(rest))
            self._emit(self.decoder.flush())
            if self.metrics is not None:
                _safe_call(self.metrics.flush)
            return

    def finish(self, timeout: float | None = 60.0) -> None:
        """Stop following, deliver the rest of the log, and wait for that to be done."""
        self._finishing.set()
        with self._stream_lock:
            if self._stream is not None:
                self._stream.close()
        if self._thread.is_alive() or not self._closed.is_set():
            self._thread.join(timeout)

    def stop(self) -> None:
        """Stop without draining (the listener went away)."""
        self._drain_at_end = False
        self._finishing.set()
        with self._stream_lock:
            if self._stream is not None:
                self._stream.close()


class Watcher:
    """Watches every job of one tier with batched queries; see the module docstring."""

    def __init__(
        self,
        tier: WatchSource,
        *,
        status_interval: float = 15.0,
        rank_interval: float = 1.0,
        first_poll: float = 0.5,
        max_backoff: float = 30.0,
        jitter: float = 0.2,
        stale_after_s: float | None = None,
    ) -> None:
        self.tier = tier
        self.status_interval = status_interval
        self.rank_interval = rank_interval
        self.first_poll = first_poll
        self.max_backoff = max_backoff
        self.jitter = jitter  # a reconnect waits up to this fraction less (reachability.py)
        profile = getattr(tier, "profile", None)
        self.stale_after = (stale_after_s if stale_after_s is not None
                            else stale_after(getattr(profile, "settings", None)))
        self._rng = random.Random()
        self.scheduler_queries = 0
        self.rank_queries = 0
        self._jobs: dict[str, _Watched] = {}
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._next_sched = 0.0
        self._fast_delay = first_poll
        self._reachable = True
        self._sched_message: str | None = None
        self._next_ranks = 0.0
        self._fail_delay = 0.0
        self._fail_attempts = 0  # scheduler queries failed in a row
        self._last_ok: float | None = None  # monotonic time of the last answer
        self._down_since: float | None = None  # the last answer before the current outage
        self._rank_notes: dict[str, str] = {}  # job id -> what the last rank poll saw wrong (full disk)
        self.answered_at: float | None = None  # wall time of the scheduler's last answer
        self._counter = itertools.count()
        self._array_tasks: dict[str, dict[str, JobStatus]] = {}  # array key -> its tasks' status
        self._uploading: set[str] = set()  # keys of COMPLETED jobs whose checkpoint is being uploaded
        #: When a running job's rank is named a straggler (batch/straggler.py); tests shorten it.
        self.straggler_rule = StragglerRule()
        #: When a running job is said to look hung (batch/hang.py; the profile's hang_after).
        self.hang_rule = HangRule()
        #: How often an interrupted checkpoint upload is resumed, and the first wait (doubled).
        self.upload_attempts = 5
        self.upload_retry_delay = 5.0

    # --- public ------------------------------------------------------------------------
    def watch(
        self,
        record: JobRecord,
        *,
        on_status: StatusCallback | None = None,
        on_lines: LinesCallback | None = None,
        on_end: StatusCallback | None = None,
        follow_logs: bool = True,
        log_offset: int = 0,
        skip_partial: bool = False,
        metrics: RankMetrics | None = None,
    ) -> JobSubscription:
        """Start delivering this job's status changes (and log lines) to the callbacks; ``close``
        the subscription (or :meth:`unwatch` it) to stop. ``metrics``: fed each log batch before
        ``on_lines`` gets it (:class:`LogFollower`)."""
        sub = JobSubscription(record, on_status=on_status, on_lines=on_lines, on_end=on_end)
        sub.watcher = self
        with self._lock:
            watched = self._jobs.setdefault(record.key, _Watched(record))
            watched.subs.append(sub)
            current = watched.status
        if follow_logs and on_lines is not None:
            sub.follower = LogFollower(
                self.tier, record, log_offset, on_lines, skip_partial=skip_partial, metrics=metrics
            )
            sub.follower.start()
        if current is not None:
            _safe_call(sub.deliver, current)
            with self._lock:
                uploading = record.key in self._uploading
            if current.state.terminal and not uploading:  # else the upload's end ends it
                self._end(sub, current)
        self._ensure_thread()
        self.kick()
        return sub

    def unwatch(self, sub: JobSubscription) -> None:
        """Stop delivering to ``sub``: the same as ``sub.close()``."""
        sub.close()

    def _forget(self, sub: JobSubscription) -> None:
        """The watcher's half of closing ``sub`` (its follower is stopped by the subscription)."""
        with self._lock:
            watched = self._jobs.get(sub.record.key)
            if watched and sub in watched.subs:
                watched.subs.remove(sub)
                if not watched.subs and (watched.status is None or not watched.status.state.terminal):
                    del self._jobs[sub.record.key]

    def array_tasks(self, key: str) -> dict[str, JobStatus]:
        """The latest status of each task of the array ``key`` while it is watched (task id ->
        status; empty when the array is not watched): the server's array detail reads it."""
        with self._lock:
            return dict(self._array_tasks.get(key, {}))

    def kick(self) -> None:
        """Ask the scheduler soon (after a submit or cancel), then back off again."""
        with self._lock:
            self._fast_delay = self.first_poll
            self._next_sched = min(self._next_sched, time.monotonic() + self.first_poll)
        self._wake.set()

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()
        with self._lock:
            subs = [s for w in self._jobs.values() for s in w.subs]
        for sub in subs:
            if sub.follower is not None:
                sub.follower.stop()

    # --- the loop ------------------------------------------------------------------------
    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._stopped.clear()
                self._thread = threading.Thread(
                    target=self._loop, name=f"jt-watch-{self.tier.name}", daemon=True
                )
                self._thread.start()

    def _active(self) -> list[_Watched]:
        with self._lock:
            return [
                w for w in self._jobs.values()
                if w.subs and (w.status is None or not w.status.state.terminal)
            ]

    def _loop(self) -> None:
        while not self._stopped.is_set():
            try:
                wait = self._cycle()
            except Exception:  # a bug in one cycle must not end the watching of every job
                log.exception("jupyter-tiers watcher cycle failed; retrying")
                wait = 1.0
            if self._wake.wait(wait):
                self._wake.clear()

    def _cycle(self) -> float:
        """One round of queries and deliveries; returns how long to sleep before the next."""
        active = self._active()
        if not active:
            return 5.0
        now = time.monotonic()
        # An array watched as one record is asked about through its tasks, in the same batch.
        records = expand_arrays([w.record for w in active])
        sched = None
        polled = now >= self._next_sched
        # The rank files before the scheduler: a "pending" asked after a run's ranks started
        # means a requeue (merge_status's ranks_read_first).
        ranks = None
        rank_message = None
        if now >= self._next_ranks or polled:
            self.rank_queries += 1
            try:
                ranks = self.tier.poll_ranks(records)
                self._rank_notes = self.tier.rank_notes()
            except Exception as exc:
                rank_message = f"cannot read rank state, retrying: {exc}"
            self._next_ranks = time.monotonic() + self.rank_interval
        if polled:
            self.scheduler_queries += 1
            problem = None
            try:
                sched = self.tier.poll_scheduler(records)
                self._reachable, self._sched_message = True, None
                self._fail_attempts, self._last_ok, self._down_since = 0, now, None
                self.answered_at = wall_clock()
            except ControllerUnreachable as exc:
                problem = f"controller unreachable: {exc}"
            except TiersError as exc:
                problem = f"cannot reach the cluster: {exc}"
            except Exception as exc:
                problem = f"status query failed: {exc!r}"
            if problem is not None:
                # Back off with jitter, capped; the banner says which attempt and when the next.
                self._reachable = False
                self._fail_attempts += 1
                self._fail_delay = backoff_delay(self._fail_attempts, base=2.0, cap=self.max_backoff,
                                                 jitter=self.jitter, uniform=self._rng.random)
                if self._down_since is None:
                    self._down_since = self._last_ok if self._last_ok is not None else now
                self._sched_message = f"{problem} — {reconnecting(self._fail_attempts, self._fail_delay)}"
        if sched is not None and ranks is not None:
            sched, ranks = self._reread_ended(records, sched, ranks)
        changed, finishing = self._apply(
            active, sched, ranks, self._reachable, self._sched_message or rank_message
        )
        with self._lock:
            now = time.monotonic()
            if polled and not self._reachable:
                self._next_sched = now + self._fail_delay
            elif polled:
                self._fail_delay = 0.0
                if changed:
                    self._fast_delay = self.first_poll
                self._next_sched = now + self._fast_delay
                self._fast_delay = min(self._fast_delay * 2, self.status_interval)
            if finishing and self._reachable:
                # Ranks ended: the scheduler ends the job within moments; ask again soon. News
                # from the rank files restarts the fast back-off (in steady state the fast delay
                # has grown to status_interval, which would not be sooner at all).
                if changed:
                    self._fast_delay = self.first_poll
                self._next_sched = min(self._next_sched, now + self._fast_delay)
            return max(0.05, min(self._next_sched, self._next_ranks) - now)

    def _reread_ended(self, records: list[JobRecord], sched: dict, ranks: dict) -> tuple[dict, dict]:
        """The rank files again for the jobs the scheduler says ended; (sched, ranks) to merge.

        They were read before the scheduler was asked, and an ended job's status is final (its
        watch stops), so a rank that recorded its exit in between would be lost from it: the
        failing rank an end reason names. If that read fails, the scheduler's answer for those
        jobs is set aside and they are asked about again next cycle: no end without it.
        """
        ended = ended_ids(sched)
        if not ended:
            return sched, ranks
        self.rank_queries += 1
        try:
            again = self.tier.poll_ranks([r for r in records if r.job_id in ended])
        except Exception:
            return {k: v for k, v in sched.items() if k not in ended}, ranks
        return sched, {**ranks, **again}

    def _apply(
        self,
        active: list[_Watched],
        sched: dict | None,
        ranks: dict | None,
        reachable: bool,
        message: str | None,
    ) -> tuple[bool, bool]:
        """Merge and deliver new statuses; returns (anything changed, some job's ranks ended)."""
        changed_any = False
        finishing = False
        for watched in active:
            rec = watched.record
            info = sched.get(rec.job_id) if sched is not None else None
            prev = watched.status
            prev_real = watched.real or prev
            if prev_real is None and sched is None and ranks is None and reachable:
                continue  # newly watched and nothing asked yet: no status to make up
            if is_array(rec):
                status, self._array_tasks[rec.key] = merge_array_status(
                    rec, sched, ranks, self._array_tasks.get(rec.key, {}))
            else:
                status = merge_status(
                    rec.job_id,
                    info,
                    ranks.get(rec.job_id) if ranks is not None else None,
                    rec.world_size,
                    prev_real,
                    restarts=rec.restarts,
                    ranks_read_first=sched is not None and ranks is not None,
                )
            status = replace(status, controller_reachable=reachable,
                             message=message or self._rank_notes.get(rec.job_id),
                             straggler=self._straggler(watched, status, ranks is not None),
                             stalled=self._stalled(watched, status, ranks is not None))
            if prev is not None and prev.state.terminal:
                continue
            real = status
            status = self._shown(real, reachable)
            upload = status.state is JobState.COMPLETED and _wants_upload(rec)
            if upload:
                uploaded = self._uploaded_uri(rec)  # attached after the upload ended: show it
                if uploaded is not None:
                    upload, status = False, replace(status, checkpoint=uploaded)
                else:
                    status = self._upload_started(rec, status)
            if status != prev:
                # Heartbeats and elapsed time change on every poll; only a new job or rank state
                # is news that should bring the next scheduler query forward.
                changed_any = changed_any or (
                    prev is None
                    or status.state != prev.state
                    or [r.phase for r in status.ranks] != [r.phase for r in prev.ranks]
                )
                with self._lock:
                    watched.status, watched.real = status, real
                    subs = list(watched.subs)
                # Record first: a listener (Job.wait) may return to code that reads the registry.
                # What is recorded is what the cluster said, never the UNKNOWN of a long outage.
                if prev_real is None or prev_real.state != real.state or prev_real.restarts != real.restarts \
                        or (is_array(rec) and prev_real.reason != real.reason):  # the task counts
                    self._record_state(rec, real)
                for sub in subs:
                    _safe_call(sub.deliver, status)
            finishing = finishing or (not status.state.terminal and _ranks_finishing(status))
            if upload:
                threading.Thread(target=self._upload_then_end, args=(watched, status),
                                 name=f"jt-upload-{next(self._counter)}", daemon=True).start()
            elif status.state.terminal:
                with self._lock:
                    subs = list(watched.subs)
                for sub in subs:
                    self._end(sub, status)
        return changed_any, finishing

    def _straggler(self, watched: _Watched, status: JobStatus, fresh: bool) -> str | None:
        """The straggler line of a running job (batch/straggler.py), from its ranks' usage
        samples: updated when the rank files were just read, else the last one kept."""
        if status.state is not JobState.RUNNING or is_array(watched.record):
            return None
        if not fresh:
            return watched.real.straggler if watched.real is not None else None
        if watched.stragglers is None:
            watched.stragglers = StragglerWatch(self.straggler_rule)
        found = watched.stragglers.feed_ranks(status.ranks)
        return found.text() if found is not None else None

    def _stalled(self, watched: _Watched, status: JobStatus, fresh: bool) -> str | None:
        """The "looks hung" line of a running job (batch/hang.py), from its ranks' states and
        usage samples and how far its followers have read the log: updated when the rank files
        were just read, else the last one kept."""
        if status.state is not JobState.RUNNING or is_array(watched.record):
            return None
        if not fresh:
            return watched.real.stalled if watched.real is not None else None
        if watched.hang is None:
            watched.hang = HangWatch(self.hang_rule)
        with self._lock:
            offsets = [s.follower.offset for s in watched.subs if s.follower is not None]
        return watched.hang.feed(time.monotonic(), status.ranks, max(offsets) if offsets else None)

    def _shown(self, status: JobStatus, reachable: bool) -> JobStatus:
        """``status`` as views show it: UNKNOWN (the last seen state and when) once the cluster
        has not answered for longer than ``stale_after``, never a confident RUNNING."""
        now = time.monotonic()
        if reachable or status.state.terminal or not is_stale(self._down_since, now, self.stale_after):
            return status
        assert self._down_since is not None
        wall = wall_clock()
        reason = last_seen(status.state.value, wall - (now - self._down_since), wall)
        return replace(status, state=JobState.UNKNOWN, reason=reason)

    # --- --checkpoint-to: the upload between COMPLETED and the end of the watch -------------
    def _uploaded_uri(self, rec: JobRecord) -> str | None:
        upload = recorded_upload(self.tier.registry, rec)
        uri = upload.get("uri") if upload is not None and upload.get("state") == "done" else None
        return uri if isinstance(uri, str) else None

    def _upload_started(self, rec: JobRecord, status: JobStatus) -> JobStatus:
        with self._lock:
            self._uploading.add(rec.key)
        target = target_uri(self.tier.profile, rec, status.checkpoint)
        return replace(status, checkpoint=shown_checkpoint(status.checkpoint, UploadReport(), target))

    def _upload_then_end(self, watched: _Watched, status: JobStatus) -> None:
        """Upload the job's checkpoint (checkpoint_upload.py), delivering progress as statuses;
        an interrupted upload (an SSH cut) is resumed with back-off; then end every subscriber
        with the final status (its checkpoint is the URI, or why the upload failed)."""
        rec = watched.record
        task = checkpoint_upload.task_of(rec) is not None
        record = replace(rec, state="COMPLETED") if task else rec  # a task's: the status says so
        with contextlib.suppress(TiersError):  # the upload below says what is wrong
            # An array's task: its checkpoint is listed now (one remote command).
            record = (checkpoint_upload.with_checkpoint(self.tier, record) if task
                      else self.tier.registry.get(rec.key))
        path = decode_detail(record.detail)[1]
        target = target_uri(self.tier.profile, rec, path)

        def deliver(report: UploadReport) -> None:
            shown = replace(status, checkpoint=shown_checkpoint(path, report, target))
            with self._lock:
                watched.status = shown
                subs = list(watched.subs)
            for sub in subs:
                _safe_call(sub.deliver, shown)

        final = UploadReport(error="not started")
        delay = self.upload_retry_delay
        for attempt in range(self.upload_attempts):
            try:
                if not task:
                    record = self.tier.registry.get(rec.key)
                final = checkpoint_upload.upload_checkpoint(self.tier, record, deliver)  # tests replace it
                break
            except UploadError as exc:
                final = UploadReport(error=str(exc))
                if not exc.retry or attempt + 1 == self.upload_attempts or self._stopped.wait(delay):
                    break
                delay *= 2
            except Exception as exc:  # a bug must not leave the job's watchers waiting forever
                log.exception("checkpoint upload failed")
                final = UploadReport(error=repr(exc))
                break
        end = replace(status, checkpoint=final.done_uri
                      or f"{path or 'checkpoint'} (not uploaded: {final.error})")
        with self._lock:
            watched.status = end
            self._uploading.discard(rec.key)
            subs = list(watched.subs)
        for sub in subs:
            _safe_call(sub.deliver, end)
            self._end(sub, end)

    def _record_state(self, rec: JobRecord, status: JobStatus) -> None:
        try:
            if is_array(rec):  # its detail also holds its tasks' uploads: keep them
                record_counts(self.tier.registry, rec.key, status.state.value, status.reason or "")
            else:
                self.tier.registry.record_end(rec, status)  # before the state: its reader finds it
                self.tier.registry.update(rec.key, state=status.state.value, nodelist=status.nodelist,
                                          restarts=status.restarts)
        except Exception:
            log.exception("registry update failed")

    def _end(self, sub: JobSubscription, status: JobStatus) -> None:
        if sub.ending:
            return
        sub.ending = True

        def finish() -> None:
            if sub.follower is not None:
                sub.follower.finish()
            if not sub.closed:
                _safe_call(sub.on_end, status)
            sub.end(status)

        threading.Thread(target=finish, name=f"jt-end-{next(self._counter)}", daemon=True).start()


def _wants_upload(rec: JobRecord) -> bool:
    """A job's or an array task's checkpoint is uploaded when it COMPLETES (a whole array
    watched as one record is not: its tasks are, each when it completes)."""
    spec = rec.spec if isinstance(rec.spec, dict) else {}
    return bool(spec.get("checkpoint_to")) and not is_array(rec)


def _ranks_finishing(status: JobStatus) -> bool:
    if not status.ranks:
        return False
    return any(r.phase is RankPhase.FAILED for r in status.ranks) or all(
        r.phase.done for r in status.ranks
    )
