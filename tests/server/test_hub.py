"""The shared watcher on the real local tier: ten listeners share one subscription per job, a
job submitted by another process appears, its end is pushed, detail reads with ``refresh=0``
cost no scheduler query while it is watched, and with nobody listening nothing is watched and
the hub's thread ends."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from jupyter_tiers import api
from jupyter_tiers.config.registry import JobRecord, Registry
from jupyter_tiers.core.errors import TiersError
from jupyter_tiers.core.model import JobState, JobStatus
from jupyter_tiers.faces.server.hub import Hub

GUARD = 60.0


@pytest.fixture
def local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiers_config: Any) -> Any:
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    tiers_config({"profiles": {"laptop": {"tier": "local"}}})
    try:
        yield api.connect("laptop")
    finally:
        api.close_all()


class Inbox:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.cv = threading.Condition()

    def __call__(self, message: dict[str, Any]) -> None:
        with self.cv:
            self.messages.append(message)
            self.cv.notify_all()

    def wait(self, pred: Any, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + GUARD
        with self.cv:
            while True:
                hit = next((m for m in self.messages if pred(m)), None)
                if hit is not None:
                    return hit
                left = deadline - time.monotonic()
                if left <= 0:
                    pytest.fail(f"gave up waiting for {what}; got {self.messages!r}"[:2000])
                self.cv.wait(min(left, 1.0))


def _until(cond: Any, what: str) -> None:
    deadline = time.monotonic() + GUARD
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.05)


def count_scheduler_queries(tier: Any, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Scheduler queries this thread makes through ``tier`` (the tier's watcher polls from its own
    thread and is not counted): the cost of detail reads alone."""
    me = threading.get_ident()
    calls: list[int] = []
    real = tier.poll_scheduler

    def counting(records: Any) -> Any:
        if threading.get_ident() == me:
            calls.append(len(records))
        return real(records)

    monkeypatch.setattr(tier, "poll_scheduler", counting)
    return calls


def test_ten_listeners_share_one_subscription_and_idle_stops_watching(
        local: Any, tiers_config: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    hub = Hub(scan_interval=0.2)
    # The job ends when the test says so: one that ended before the hub subscribed (a slow machine)
    # would never be watched.
    gate = tmp_path / "end-now"
    job = local.submit(local.make_spec(
        f"import os, time\nwhile not os.path.exists({str(gate)!r}):\n    time.sleep(0.05)\nprint('done')\n",
        name="hubbed"))
    inboxes = [Inbox() for _ in range(10)]
    tokens = []
    for inbox in inboxes:
        token, snapshot = hub.listen(inbox)
        tokens.append(token)
        assert [i["key"] for i in snapshot["items"]] == [job.key]
    _until(lambda: hub.watched() == [job.key], "the job to be watched")
    watched = local.watcher._jobs[job.key]
    assert len(watched.subs) == 1  # one subscription for ten listeners
    gate.touch()
    for inbox in inboxes:
        end = inbox.wait(lambda m: m["type"] == "update" and any(
            i["key"] == job.key and i["terminal"] for i in m["items"]), "the job's end")
        item = next(i for i in end["items"] if i["key"] == job.key)
        assert item["state"] == "COMPLETED" and item["summary"].startswith(f"job {job.id} COMPLETED")
    _until(lambda: hub.watched() == [], "the ended job to be dropped")

    # A job submitted elsewhere (here: straight into the registry through the tier) shows up.
    other = local.submit(local.make_spec("import time\ntime.sleep(300)\n", name="late"))
    inboxes[0].wait(lambda m: m["type"] == "update" and any(i["key"] == other.key for i in m["items"]),
                    "the new job")
    _until(lambda: hub.watched() == [other.key], "the new job to be watched")

    # The profile is edited: the process replaces its tier, and the hub follows onto the new one.
    tiers_config({"profiles": {"laptop": {"tier": "local", "description": "edited"}}})
    _until(lambda: api.connect("laptop") is not local and other.key in api.connect("laptop").watcher._jobs,
           "the job watched on the new tier")

    # Detail panels re-reading (?refresh=0) are answered from the watch: ten reads, no query;
    # an explicit refresh is one query.
    tier = api.connect("laptop")
    queries = count_scheduler_queries(tier, monkeypatch)
    _until(lambda: hub.cached_status(other.key) is not None, "the watch's first status")
    for _ in range(10):
        detail = hub.details(other.key, refresh=False)
        assert detail["key"] == other.key and detail["view"]["job_name"] == "late"
        assert detail["state"] in ("PENDING", "RUNNING") and detail["view"]["state"] == detail["state"]
    assert queries == []
    assert hub.details(other.key)["state"] in ("PENDING", "RUNNING")
    assert queries == [1]

    for token in tokens:
        hub.unlisten(token)
    _until(lambda: hub.watched() == [] and hub._thread is None, "the idle hub to stop")
    assert other.key not in api.connect("laptop").watcher._jobs  # nothing polled for nobody
    # Not watched any more: a cached read falls back to one refresh (never a stale answer).
    assert hub.cached_status(other.key) is None
    assert hub.details(other.key, refresh=False)["state"] in ("PENDING", "RUNNING")
    assert queries == [1, 1]
    other.cancel()
    hub.stop()


def test_removed_records_are_announced(tmp_path: Path) -> None:
    registry = Registry(tmp_path / "hub-registry.sqlite")
    done = JobRecord(profile="hpc", tier="slurm", job_id="7", name="old", world_size=1, state="COMPLETED")
    registry.add(done)
    hub = Hub(scan_interval=0.1, records=registry.list)
    inbox = Inbox()
    token, snapshot = hub.listen(inbox)
    try:
        rows = [(i["key"], i["state"], i["terminal"]) for i in snapshot["items"]]
        assert rows == [("hpc/7", "COMPLETED", True)]
        assert hub.watched() == []  # nothing active: nothing to ask any cluster
        registry.remove(done.key)
        removed = inbox.wait(lambda m: m["type"] == "removed", "the removal")
        assert removed["keys"] == ["hpc/7"] and removed["rev"] > snapshot["items"][0]["rev"]
        assert hub.items() == ([], [])
    finally:
        hub.unlisten(token)
        hub.stop()


def test_a_service_deleted_and_recreated_under_its_key_is_followed_again(local: Any) -> None:
    """The hub holds the deleted service's final status; the re-created service (same key, a new
    start) is watched again and its live states reach the listeners."""
    from tests.local_serve.conftest import HTTP_BODY

    serve = api.connect("laptop", kind="serve")
    spec = serve.make_spec(HTTP_BODY, name="again", readiness="/")
    first = serve.apply(spec)
    handles = [first]
    # No periodic scans: the watch's final status arrives before the registry is read again
    # (the case the hub got wrong), and the registry is read when the list is asked for.
    hub = Hub(scan_interval=3600)
    inbox = Inbox()
    token, _ = hub.listen(inbox)
    try:
        key = first.record.key
        inbox.wait(lambda m: m["type"] == "update" and any(
            i["key"] == key and i["state"] == "READY" for i in m["items"]), "the first one ready")
        first.delete()
        _until(lambda: (s := hub.status_of(key)) is not None and s.state.terminal, "the final status")
        _until(lambda: hub.watched() == [], "the deleted service to be dropped")
        inbox.messages.clear()
        second = serve.apply(spec)
        handles.append(second)
        assert second.record.key == key
        _until(lambda: bool(hub.items()) and hub.watched() == [key], "the re-created service watched")
        ready = inbox.wait(lambda m: m["type"] == "update" and any(
            i["key"] == key and i["state"] == "READY" for i in m["items"]), "the second one ready")
        assert not next(i for i in ready["items"] if i["key"] == key)["terminal"]
        second.delete()
        _until(lambda: (s := hub.status_of(key)) is not None and s.state.terminal, "the second end")
    finally:
        hub.unlisten(token)
        hub.stop()
        for handle in handles:
            with contextlib.suppress(Exception):  # already deleted when the test got that far
                handle.delete()


def hub_of_one_job(tmp_path: Path, job_id: str, state: str) -> tuple[Hub, Registry, JobRecord]:
    """A hub over a registry holding one Slurm job record, with no cluster to reach (its
    subscriptions fail at once) and no periodic scan: the test drives every change."""
    registry = Registry(tmp_path / "hub-registry.sqlite")
    rec = JobRecord(profile="hpc", tier="slurm", job_id=job_id, name="run", world_size=1, state=state,
                    submitted_at=time.time())
    registry.add(rec)

    def no_cluster(profile: str, kind: Any) -> Any:
        raise TiersError("no cluster in this test")

    return Hub(scan_interval=3600, records=registry.list, connect=no_cluster), registry, rec


def test_updates_reach_the_listeners_in_the_order_of_the_changes(tmp_path: Path) -> None:
    """A scan's update held up on its way out (a busy machine) while the job's watch delivers its
    end: the end still reaches the listeners last, so no tab's row stays on RUNNING (the hub's
    cache had the end, so nothing would ever correct it)."""
    hub, registry, rec = hub_of_one_job(tmp_path, "8", "RUNNING")
    got: list[dict[str, Any]] = []
    changed, held, go_on = threading.Event(), threading.Event(), threading.Event()

    def listener(message: dict[str, Any]) -> None:
        if changed.is_set() and message["type"] == "update" and not held.is_set():
            held.set()  # the scan's update of the changed record: held up on its way out
            go_on.wait(30)
        got.append(message)

    token, _ = hub.listen(listener)
    try:
        changed.set()
        registry.update(rec.key, state="RUNNING", nodelist="node1")
        scanner = threading.Thread(target=hub.scan, name="scanner")
        scanner.start()
        assert held.wait(30)
        end = JobStatus(job_id="8", state=JobState.COMPLETED, nodelist="node1", world_size=1)
        ender = threading.Thread(target=hub._on_status, args=(rec.key, end), name="ender")
        ender.start()
        ender.join(0.5)  # time for an end that does not wait for the held update to overtake it
        go_on.set()
        scanner.join(30)
        ender.join(30)

        def states() -> list[str]:
            return [i["state"] for m in list(got) if m["type"] == "update" for i in m["items"]
                    if i["key"] == rec.key]

        _until(lambda: len(states()) >= 2, "both updates")  # (the held one may be the hub loop's)
        assert states() == ["RUNNING", "COMPLETED"], states()
        assert hub.items()[0][0]["state"] == "COMPLETED"
    finally:
        go_on.set()
        hub.unlisten(token)
        hub.stop()


def test_every_change_takes_a_higher_revision(tmp_path: Path) -> None:
    """Items carry the hub's revision of their last change (``rev``), messages and listings the
    latest: a registry change, a delivered status and a removal each take a higher one, and an
    unchanged rescan none. The sidebar merges a ``GET jobs`` answer with the live updates by it."""
    hub, registry, rec = hub_of_one_job(tmp_path, "9", "PENDING")
    inbox = Inbox()
    token, snapshot = hub.listen(inbox)
    try:
        first = snapshot["items"][0]["rev"]
        assert isinstance(first, int) and snapshot["rev"] >= first
        items, _, rev = hub.listing()
        assert items[0]["rev"] == first and rev == hub.rev >= first
        hub.scan()  # nothing changed: no new revision
        assert hub.rev == rev and hub.items()[0][0]["rev"] == first

        registry.update(rec.key, state="RUNNING", nodelist="node1")
        hub.scan()
        running = inbox.wait(lambda m: m["type"] == "update" and m["items"][0]["state"] == "RUNNING",
                             "the registry's change")["items"][0]
        assert running["rev"] > rev

        hub._on_status(rec.key, JobStatus(job_id="9", state=JobState.COMPLETED, nodelist="node1",
                                          world_size=1))
        ended = inbox.wait(lambda m: m["type"] == "update" and m["items"][0]["state"] == "COMPLETED",
                           "the delivered end")["items"][0]
        assert ended["rev"] > running["rev"]
        assert hub.items()[0][0] == ended and hub.rev == ended["rev"]

        registry.remove(rec.key)
        hub.scan()
        removed = inbox.wait(lambda m: m["type"] == "removed", "the removal")
        assert removed["keys"] == [rec.key] and removed["rev"] > ended["rev"]
        # (the profile's "no cluster" error may or may not be listed yet: the hub loop's own
        # subscription attempt races the test's calls; only the items and the revision are its point)
        items, _errors, rev_now = hub.listing()
        assert (items, rev_now) == ([], removed["rev"])
    finally:
        hub.unlisten(token)
        hub.stop()
