"""The server's shared watcher: one subscription per active job or service, shared by every
browser tab.

The hub reads the local registry (a cheap sqlite query, every ``scan_interval`` seconds) to learn
about jobs and services whichever kernel started them, and while at least one listener (an
``events`` websocket, a log stream) is connected it watches each active one through its handle
(``Handle.watch``, the one subscription protocol of jobs and services; underneath, a batch tier's
Watcher makes one ``squeue`` per profile per interval for all its jobs, a Kubernetes tier shares
its namespace's watches). Listeners get the items' changes as JSON-ready messages; ten tabs are
ten listeners on the same subscriptions, so the cluster sees the same load as one. When the last
listener leaves, every subscription is closed and nothing is polled.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ... import api
from ...app import actions, items, ownjob
from ...config.registry import JobRecord
from ...core.errors import TiersError
from ...core.model import JobStatus, ServiceStatus, WorkKind
from ...engine.subscription import Subscription
from ...engine.tier import BatchTier, Tier

log = logging.getLogger(__name__)

Message = dict[str, Any]
Listener = Callable[[Message], None]


@dataclass(eq=False)
class _Sub:
    tier: Tier  # the tier it was made on (a replaced tier's are dropped)
    subscription: Subscription[Any]


class Hub:
    """See the module docstring. Thread-safe; listeners are called from the hub's and the tiers'
    threads and must not block (the server's wrap ``IOLoop.add_callback``)."""

    def __init__(self, *, scan_interval: float = 2.0, limit: int = 500,
                 records: Callable[[int], Sequence[JobRecord]] = actions.recent_records,
                 connect: Callable[[str, WorkKind], Tier] | None = None,
                 own: Callable[[], dict[str, Any] | None] = ownjob.own_item,
                 gone: Callable[[set[str]], set[str]] | None = None) -> None:
        """``gone``: which of some profiles no longer exist (the server passes
        actions.gone_profiles; their records read UNKNOWN with only Forget); None: none is."""
        self.scan_interval = scan_interval
        self._gone_of = gone or (lambda _profiles: set())
        self.limit = limit
        self._read_records = records
        self._connect = connect or actions.connect
        self._lock = threading.RLock()
        # Held from a change (a scan of the registry, a delivered status) through the sending of
        # its message: the listeners get the changes in the order they were made, so an update
        # held up on its way out cannot land after a newer one (a row stuck on RUNNING); and
        # scans do not overlap, so an older read of the registry is never applied after a newer.
        self._emit_lock = threading.RLock()
        self._listeners: dict[int, Listener] = {}
        self._ids = itertools.count(1)
        self._records: dict[str, JobRecord] = {}
        self._statuses: dict[str, JobStatus | ServiceStatus] = {}
        self._items: dict[str, dict[str, Any]] = {}
        # Every change of an item (and every removal) takes the next revision, under the lock, so
        # revisions order the changes; items carry theirs as ``rev`` and messages and listings
        # the latest (``rev``), so a client can tell an older answer from a newer update. It
        # starts from the clock (microseconds) so a restarted server's revisions are higher than
        # the ones a browser kept from before the restart.
        self._rev = time.time_ns() // 1000
        self._errors: dict[str, str] = {}
        # The Slurm job this server runs inside (app/ownjob.py), read at the first scan: a row
        # marked as the notebook's own, first in the list, never watched, never offered Cancel.
        self._own_of = own
        self._own: dict[str, Any] | None = None
        self._own_read = False
        self._subs: dict[str, _Sub] = {}
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self.scans = 0
        self._gone: set[str] = set()  # profiles of records that no longer exist (the last scan's)

    # --- listeners ---------------------------------------------------------------------------
    def listen(self, fn: Listener) -> tuple[int, Message]:
        """Add a listener; returns its token and the snapshot message it starts from."""
        self.scan()
        with self._lock:
            token = next(self._ids)
            self._listeners[token] = fn
            # server_time: the page sets its clock for ages from it, once (rowAge.ts).
            snapshot = {"type": "snapshot", "items": self._sorted_items(), "errors": self._error_list(),
                        "rev": self._rev, "server_time": round(time.time(), 3)}
        self._ensure_thread()
        self._wake.set()
        return token, snapshot

    def unlisten(self, token: int) -> None:
        with self._lock:
            self._listeners.pop(token, None)
        self._wake.set()

    @property
    def listeners(self) -> int:
        with self._lock:
            return len(self._listeners)

    def items(self) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
        """The cached items (newest first) and profile errors, after a registry scan (no
        cluster query)."""
        return self.listing()[:2]

    def listing(self) -> tuple[list[dict[str, Any]], list[dict[str, str]], int]:
        """``items()`` and the revision they are as of (every item's ``rev`` is at most it)."""
        self.scan()
        with self._lock:
            return self._sorted_items(), self._error_list(), self._rev

    @property
    def rev(self) -> int:
        """The latest revision: an answer built from a read begun after this is at least as new
        as every change up to it."""
        with self._lock:
            return self._rev

    def own_item(self) -> dict[str, Any] | None:
        """The row of the Slurm job this server runs inside (``own: true``), or None."""
        self.scan()
        with self._lock:
            return None if self._own is None else ownjob.aged(self._own)

    def status_of(self, key: str) -> JobStatus | ServiceStatus | None:
        with self._lock:
            return self._statuses.get(key)

    def cached_status(self, key: str) -> JobStatus | ServiceStatus | None:
        """The status the shared watcher last delivered for ``key`` while it watches the item, or
        its final status once both it and the registry say the item ended; else None (not
        watched, or nothing delivered yet)."""
        with self._lock:
            status, rec = self._statuses.get(key), self._records.get(key)
            if status is None or rec is None:
                return None
            if key in self._subs or (not _status_active(status) and not items.is_active(rec)):
                return status
            return None

    def details(self, ref: str, *, refresh: bool = True) -> dict[str, Any]:
        """``actions.details`` of one item. Without ``refresh`` it is answered from the cached
        status (no cluster query) when there is one, else by one refresh: a detail panel
        re-reading on every change costs the cluster nothing while the hub watches the item."""
        cached = None if refresh else self.cached_status(ref)
        return actions.details(ref, status=cached)

    def watched(self) -> list[str]:
        with self._lock:
            return sorted(self._subs)

    def stop(self) -> None:
        """Drop every subscription and end the hub's thread."""
        self._stopped.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(10)
        self._sync_subscriptions(want=set())

    # --- internals ---------------------------------------------------------------------------
    def _sorted_items(self) -> list[dict[str, Any]]:
        order = sorted(self._records.values(), key=lambda r: r.submitted_at, reverse=True)
        own = ([ownjob.aged(self._own)] if self._own is not None and self._own["key"] not in self._items
               else [])
        return own + [self._items[r.key] for r in order if r.key in self._items]

    def _error_list(self) -> list[dict[str, str]]:
        return [{"profile": p, "message": m} for p, m in sorted(self._errors.items())]

    def _next_rev(self) -> int:
        self._rev += 1
        return self._rev

    def _item(self, rec: JobRecord, status: JobStatus | ServiceStatus | None) -> dict[str, Any]:
        """The row of ``rec``; a record of a profile that no longer exists is orphaned (UNKNOWN,
        only Forget). Called under the lock."""
        item = items.item_from(rec, status)
        return (items.orphaned(item) if rec.profile in self._gone else item).to_json()

    def _stamp(self, key: str, item: dict[str, Any]) -> dict[str, Any] | None:
        """Store ``item`` with the next revision if it differs from the cached one (revision
        aside) and return it; None when nothing changed. Called under the lock. The registry's
        row of the job this server runs inside (if it is one) keeps the own mark."""
        if self._own is not None and key == self._own["key"]:
            item = ownjob.mark_own(item)
        old = self._items.get(key)
        if old is not None and {k: v for k, v in old.items() if k != "rev"} == item:
            return None
        item["rev"] = self._next_rev()
        self._items[key] = item
        return item

    def _emit(self, message: Message) -> None:
        with self._lock:
            listeners = list(self._listeners.values())
        for fn in listeners:
            try:
                fn(message)
            except Exception:  # a broken listener must not stop the others
                log.exception("jupyter-tiers hub listener failed")

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._stopped.clear()
                self._thread = threading.Thread(target=self._loop, name="tiers-hub", daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        """Scan and keep the subscriptions in step while anyone listens; with nobody left, drop
        them all and end (``listen`` starts the thread again)."""
        while not self._stopped.is_set():
            try:
                self.scan()
                with self._lock:
                    listening = bool(self._listeners)
                    want = {k for k, r in self._records.items()
                            if listening and items.is_active(r) and r.profile not in self._gone}
                if listening:
                    self._drop_replaced()
                self._sync_subscriptions(want)
            except Exception:
                log.exception("jupyter-tiers hub cycle failed; retrying")
                listening = True
            with self._lock:
                if not listening and not self._listeners:
                    self._thread = None
                    return
            if self._wake.wait(self.scan_interval):
                self._wake.clear()

    def scan(self) -> None:
        """Read the registry; emit updates for new or changed records and removals."""
        with self._emit_lock:
            self._scan()

    def _scan(self) -> None:
        try:
            records = self._read_records(self.limit)
        except TiersError as exc:
            log.warning("jupyter-tiers hub cannot read the registry: %s", exc)
            return
        gone = self._gone_of({r.profile for r in records})  # read outside the lock
        changed: list[dict[str, Any]] = []
        renewed: list[_Sub] = []
        wake = False
        removed_rev = 0
        own: dict[str, Any] | None = None
        if not self._own_read:  # under the emit lock: read once, by the first scan
            self._own_read = True
            try:
                own = self._own_of()
            except Exception:  # never stop the listing for it
                log.exception("jupyter-tiers hub cannot tell the Slurm job it runs inside")
        with self._lock:
            self.scans += 1
            self._gone = gone
            seen = {r.key: r for r in records}
            if own is not None:
                own["rev"] = self._next_rev()
                self._own = own
                if own["key"] not in seen:  # else the registry's row, marked (_stamp)
                    changed.append(own)
            removed = [k for k in self._records if k not in seen]
            for key in removed:
                self._records.pop(key, None)
                self._items.pop(key, None)
                self._statuses.pop(key, None)
            if removed:
                removed_rev = self._next_rev()
            for key, rec in seen.items():
                old = self._records.get(key)
                self._records[key] = rec
                cached = self._items.get(key) or {}
                if old is not None and old == rec and bool(cached.get("orphan")) == (rec.profile in gone):
                    continue
                status = self._statuses.get(key)
                if status is not None and not items.is_active(rec) and _status_active(status):
                    status = None  # the registry knows the end before our watch does
                    self._statuses.pop(key, None)
                elif old is not None and _renewed(old, rec):
                    # Deleted and re-created under the same key: forget the old one's final
                    # status and watch, so the next sync subscribes the new one.
                    status = None
                    wake = True
                    self._statuses.pop(key, None)
                    sub = self._subs.pop(key, None)
                    if sub is not None:
                        renewed.append(sub)
                item = self._stamp(key, self._item(rec, status))
                if item is not None:
                    changed.append(item)
        for sub in renewed:
            _unsubscribe(sub)
        if wake:  # the loop subscribes it (a scan of the loop's own is followed by a sync)
            self._wake.set()
        if removed:
            self._emit({"type": "removed", "keys": removed, "rev": removed_rev})
        if changed:
            self._emit({"type": "update", "items": changed})

    def _on_status(self, key: str, status: JobStatus | ServiceStatus) -> None:
        with self._emit_lock:
            self._status_changed(key, status)
        if not _status_active(status):
            self._wake.set()  # let the loop drop the subscription

    def _status_changed(self, key: str, status: JobStatus | ServiceStatus) -> None:
        with self._lock:
            rec = self._records.get(key)
            if rec is None:
                return
            self._statuses[key] = status
            item = self._stamp(key, self._item(rec, status))
            problem = _problem(status)
            profile_news = problem is not None and self._errors.get(rec.profile) != problem
            if problem is not None:
                self._errors[rec.profile] = problem
            elif rec.profile in self._errors:
                del self._errors[rec.profile]
        if item is not None:
            self._emit({"type": "update", "items": [item]})
        if profile_news:
            self._emit({"type": "error", "profile": rec.profile, "message": problem})

    def _sync_subscriptions(self, want: set[str]) -> None:
        """Subscribe what is wanted and not watched, unsubscribe the rest. Tier calls are made
        outside the lock: a tier may deliver a status from its own thread while subscribing."""
        with self._lock:
            for key, status in self._statuses.items():
                if key in want and not _status_active(status):
                    want.discard(key)
            drop = [(k, s) for k, s in self._subs.items() if k not in want]
            for key, _ in drop:
                del self._subs[key]
            add = [self._records[k] for k in sorted(want) if k not in self._subs and k in self._records]
        for _, sub in drop:
            _unsubscribe(sub)
        for rec in add:
            try:
                tier = self._connect(rec.profile, rec.kind)
                sub = self._subscribe(tier, rec)
            except (TiersError, ValueError) as exc:
                with self._emit_lock:
                    with self._lock:
                        news = self._errors.get(rec.profile) != str(exc)
                        self._errors[rec.profile] = str(exc)
                    if news:
                        self._emit({"type": "error", "profile": rec.profile, "message": str(exc)})
                continue
            with self._lock:
                keep = rec.key not in self._subs and not self._stopped.is_set()
                if keep:
                    self._subs[rec.key] = sub
            if not keep:
                _unsubscribe(sub)

    def _drop_replaced(self) -> None:
        """Forget subscriptions on a tier the process has replaced (its profile was edited: the
        old tier is closed and watches nothing); the next sync subscribes on the new one."""
        with self._lock:
            subs = dict(self._subs)
            kinds = {(self._records[k].profile, self._records[k].kind) for k in subs if k in self._records}
        current: dict[tuple[str, WorkKind], Tier | None] = {}
        for profile, kind in kinds:
            try:
                current[(profile, kind)] = self._connect(profile, kind)
            except (TiersError, ValueError):
                current[(profile, kind)] = None
        with self._lock:
            stale = [k for k, sub in subs.items() if k in self._records and self._subs.get(k) is sub
                     and current.get((self._records[k].profile, self._records[k].kind)) is not sub.tier]
            for key in stale:
                del self._subs[key]
        for key in stale:
            _unsubscribe(subs[key])

    def _subscribe(self, tier: Tier, rec: JobRecord) -> _Sub:
        def on_status(status: JobStatus | ServiceStatus) -> None:
            self._on_status(rec.key, status)

        return _Sub(tier, tier.handle(rec).watch(on_status))

    def scheduler_queries(self) -> dict[str, int]:
        """Batched scheduler queries each batch profile's watcher made in this process."""
        out: dict[str, int] = {}
        for (name, _kind), tier in api.cached_tiers().items():
            if isinstance(tier, BatchTier):
                out[name] = out.get(name, 0) + tier.scheduler_queries
        return out


def _unsubscribe(sub: _Sub) -> None:
    try:
        sub.subscription.close()
    except Exception:
        log.exception("jupyter-tiers hub unsubscribe failed")


def _renewed(old: JobRecord, new: JobRecord) -> bool:
    """Whether ``new`` is an active record of another run than ``old`` (same key): re-created
    (a later start) or active again after the registry recorded its end."""
    if not items.is_active(new):
        return False
    return new.submitted_at != old.submitted_at or not items.is_active(old)


def _status_active(status: JobStatus | ServiceStatus) -> bool:
    return not status.state.terminal


def _problem(status: JobStatus | ServiceStatus) -> str | None:
    if isinstance(status, JobStatus):
        return status.message if not status.controller_reachable and status.message else None
    return status.message if not status.api_reachable and status.message else None
