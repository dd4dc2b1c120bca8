"""Issue 29 item 6: the sidebar's job panel is the notebook's JobView. One fail-stop job's log and
statuses go to a JobView (the notebook widget) and to what the server gives the lab panel (the
REST details' ``view`` plus the ``view=1`` log stream's messages, app/viewstate/job_stream.py);
both are replayed as the front end would (job_view.js: a reset replaces the pane, the rest add to
it; a ``view`` message sets traits over the REST ones) and compared field by field: the summary
with the ValueError text, the fold label, the folded and error lines, the charts' series."""

from __future__ import annotations

import dataclasses
import json
import random
import time
from types import SimpleNamespace
from typing import Any

from jupyter_tiers.app.viewstate import schema
from jupyter_tiers.app.viewstate.job import message_rows, record_traits
from jupyter_tiers.app.viewstate.job_stream import JobStream
from jupyter_tiers.batch.logs import LogDecoder, batch_text
from jupyter_tiers.core.model import JobState, JobStatus, RankPhase, RankState
from jupyter_tiers.engine.watch import deliver_batch
from jupyter_tiers.faces.widgets.job_view import JobView
from tests.helpers import SentRecorder
from tests.unit.test_job_view_metrics_feed import FakeWatcher, live_metrics

PATTERNS: tuple[tuple[str, str], ...] = ()  # the defaults read "loss=..."

#: Traits of one browser session, not of the job (what this page was sent, asked or saved).
SESSION = {"lines_received", "log_limit", "cancel_requested", "log_skipped_bytes", "files", "files_note",
           "downloads", "message"}


def failstop_log() -> list[bytes]:
    """A 4-rank job's log in batches: loss lines, rank 3's ValueError, then Slurm's kill reports.
    Rank 0 has fewer lines than JobView parses of a batch it defers (20): both views chart
    every point, whatever the machine's speed."""
    steps = "".join(f"{r}: step {s} loss={2.0 / s + r:.4f}\n" for s in range(1, 13) for r in range(4))
    traceback = ("3: Traceback (most recent call last):\n"
                 '3:   File "train.py", line 9, in <module>\n'
                 "3: ValueError: bad batch at step 13\n")
    kills = ("srun: error: node1: task 3: Exited with exit code 1\n"
             "srun: error: node2: tasks 0-2: Exited with exit code 143\n"
             "slurmstepd: error: *** STEP 7.0 ON node2 CANCELLED AT 2026-12-06T04:00:00 ***\n")
    return [steps[: len(steps) // 2].encode(), steps[len(steps) // 2:].encode(), traceback.encode(),
            kills.encode()]


def statuses() -> tuple[JobStatus, JobStatus]:
    running = tuple(RankState(r, RankPhase.RUNNING, node="node1" if r == 3 else "node2") for r in range(4))
    failed = (*(RankState(r, RankPhase.STOPPED, node="node2", signal=15) for r in range(3)),
              RankState(3, RankPhase.FAILED, node="node1", exit_code=1))
    base = {"job_id": "7", "nodelist": "node[1-2]", "world_size": 4, "start_time": "2026-12-06T03:59:00"}
    return (JobStatus(state=JobState.RUNNING, ranks=running, elapsed_s=40, **base),
            JobStatus(state=JobState.FAILED, ranks=failed, elapsed_s=61, exit_code=15, **base))


class RecordingView(SentRecorder, JobView):
    pass


def pane(messages: list[dict[str, Any]]) -> list[tuple[Any, str, bool, bool, bool]]:
    """The rows job_view.js holds after these ``lines`` messages: (rank, text, error, folded,
    mark)."""
    rows: list[tuple[Any, str, bool, bool, bool]] = []
    for msg in messages:
        if msg.get("kind") != "lines":
            continue
        fold, marks = set(msg.get("fold", [])), set(msg.get("marks", []))
        new = [(rank, text, bool(err), i in fold, i in marks)
               for i, (rank, text, err) in enumerate(message_rows(msg))]
        rows = new if msg.get("reset") else rows + new
    return rows


def record() -> Any:
    return SimpleNamespace(job_id="7", name="sv", profile="box", tier="slurm", jobdir="",
                           script="python train.py",
                           spec={"nodes": 2}, world_size=4, key="box:7")


def fake_job(watcher: FakeWatcher) -> Any:
    """A Job as JobView uses it, watched through ``watcher`` (no why line: no endreason rule)."""
    rec = record()
    return SimpleNamespace(id="7", name="sv", record=rec, script=rec.script, tier=SimpleNamespace(),
                           metric_patterns=lambda: PATTERNS, live_metrics=live_metrics(PATTERNS),
                           watch=watcher.watch,
                           end_reason=lambda status, **_: None,
                           efficiency=lambda status, **_: None)  # nothing sampled


def notebook(batches: list[bytes], running: JobStatus, failed: JobStatus) -> RecordingView:
    watcher = FakeWatcher()
    job = fake_job(watcher)  # a ValueError has no rule of batch/endreason.py: no why line either way
    view = RecordingView(job)
    view.metrics_interval = 0.0
    cb = watcher.callbacks
    decoder = LogDecoder(0)
    cb["on_status"](running)
    fed = 0
    for i, chunk in enumerate(batches):
        if i == len(batches) - 1:
            cb["on_status"](failed)  # the watch sees rank 3 fail before Slurm's reports arrive
        lines = decoder.feed(chunk)
        fed += len(lines)
        cb["on_lines"](lines)
        # Each batch is out before the next comes (the batcher's thread would otherwise join
        # them, and the failing rank's traceback would go out folded or not by the clock).
        deadline = time.monotonic() + 60
        while view.lines_received < fed and time.monotonic() < deadline:
            time.sleep(0.01)
        assert view.lines_received == fed
    cb["on_end"](failed)
    assert view.wait(60) is failed
    return view


def lab(batches: list[bytes], running: JobStatus,
        failed: JobStatus) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """What the lab panel's model holds: the REST view with the stream's traits over it, and the
    stream's ``lines`` messages (each through JSON, as they travel)."""
    sent: list[dict[str, Any]] = []
    stream = JobStream(lambda m: sent.append(json.loads(json.dumps(m))), PATTERNS, metrics_interval=0.0)
    decoder = LogDecoder(0)
    stream.status(running)
    for i, chunk in enumerate(batches):
        if i == len(batches) - 1:
            stream.status(failed)
        deliver_batch(decoder.feed(chunk), stream.lines, stream.metrics)  # as the handler's follower
    stream.end(failed)
    from jupyter_tiers.batch.status import summary_line

    state = schema.defaults(schema.JobViewState)
    state.update(schema.checked(schema.JobViewState, record_traits(record(), failed, summary_line(failed))))
    for msg in sent:
        if "view" in msg:
            state.update(schema.checked(schema.JobViewState, msg["view"]))
    return state, [m for m in sent if m.get("kind") == "lines"]


def compare(batches: list[bytes]) -> tuple[RecordingView, dict[str, Any]]:
    running, failed = statuses()
    view = notebook(batches, running, failed)
    state, lines = lab(batches, running, failed)
    for f in dataclasses.fields(schema.JobViewState):
        if f.name in SESSION:
            continue
        assert state[f.name] == getattr(view, f.name), (f.name, state[f.name], getattr(view, f.name))
    assert pane(lines) == pane(view.sent)
    view.close()
    return view, state


def test_the_lab_panel_shows_what_the_notebook_shows_for_a_fail_stop_job() -> None:
    view, state = compare(failstop_log())
    # What issue 29 saw missing in the sidebar, now there, and the same as the notebook's:
    assert "ValueError: bad batch at step 13" in state["summary"], state["summary"]
    assert "first failure: rank 3 (node1) exit 1" in state["summary"]
    assert state["fold_label"].startswith("3 ranks stopped by fail-stop after rank 3 (node1) failed")
    assert len(state["metrics"]["loss"]) == 12 and state["metrics_rank"] == 0
    rows = pane(view.sent)
    errors = [r[1] for r in rows if r[2]]
    assert errors[:2] == ["Traceback (most recent call last):", "ValueError: bad batch at step 13"], errors
    assert [r[1] for r in rows if r[4]] == ["Traceback (most recent call last):"]  # the fold goes before it
    folded = [r[1] for r in rows if r[3]]
    assert folded and all("node2" in t for t in folded), folded


def test_same_view_for_any_batching_seeded() -> None:
    """However the follower cuts the log into batches, both show the same (seeded)."""
    whole = b"".join(failstop_log())
    rng = random.Random(29)
    for _ in range(12):
        cuts = sorted(rng.sample(range(1, len(whole) - 1), rng.randint(1, 6)))
        # the last batch must hold Slurm's reports: the failed status comes before it
        cuts = [c for c in cuts if c < whole.index(b"srun: error")]
        pieces = [whole[a:b] for a, b in zip([0, *cuts], [*cuts, whole.index(b"srun: error")], strict=True)]
        compare([p for p in pieces if p] + [whole[whole.index(b"srun: error"):]])


def test_follower_text_of_log_lines_keeps_rank_prefixes() -> None:
    lines = LogDecoder(0).feed(b"0: a\nplain\n1: b\n")
    text, end = batch_text(list(lines))
    assert text == "0: a\nplain\n1: b\n" and end == len(b"0: a\nplain\n1: b\n")


def test_a_stream_resumed_mid_log_sends_no_charts_or_summary() -> None:
    """A reconnect at an offset saw part of the log: the panel keeps what it was sent before."""
    _running, failed = statuses()
    sent: list[dict[str, Any]] = []
    stream = JobStream(sent.append, PATTERNS, start=100, metrics_interval=0.0)
    deliver_batch(LogDecoder(100).feed(b"0: step 9 loss=0.5\n"), stream.lines, stream.metrics)
    stream.end(failed)
    views = [m["view"] for m in sent if "view" in m]
    assert views and all(set(v) == {"fold_label"} for v in views), views
    assert [m["offset"] for m in sent if m.get("kind") == "lines"] == [100 + len(b"0: step 9 loss=0.5\n")]


def test_a_job_view_no_page_shows_goes_quiet_and_catches_a_returning_page_up() -> None:
    """After a page showed it, a JobView unseen for UNSEEN_AFTER_S sends no lines, status or
    charts (every kernel message counts as the server's activity: a hub's culler must be able to
    stop a server whose browser closed while a job runs); "hello" from a page brings it all,
    and the end is always set."""
    from jupyter_tiers.faces.widgets.view_common import SeenGate

    class Clock:
        now = 1000.0

        def __call__(self) -> float:
            return self.now

    running, failed = statuses()
    watcher = FakeWatcher()
    job = fake_job(watcher)
    view = RecordingView(job)
    clock = Clock()
    view._gate = SeenGate(after=150, clock=clock)
    cb = watcher.callbacks
    decoder = LogDecoder(0)
    view._on_front_end_msg(view, {"kind": "hello"}, [])  # a page shows it
    cb["on_lines"](decoder.feed(b"0: step 1 loss=2.0\n"))
    deadline = time.monotonic() + 60
    while view.lines_received < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    sent = len(view.sent)
    clock.now += 151  # the browser closed
    cb["on_status"](running)
    cb["on_lines"](decoder.feed(b"0: step 2 loss=1.0\n"))
    while view.lines_received < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert view.lines_received == 2
    assert len(view.sent) == sent and view.state != "RUNNING"  # nothing went out
    view._on_front_end_msg(view, {"kind": "hello"}, [])  # the page is back
    assert view.state == "RUNNING"
    assert [text for _rank, text, *_ in pane(view.sent)][-2:] == ["step 1 loss=2.0", "step 2 loss=1.0"]
    clock.now += 151  # gone again: the end still lands in the widget's state
    cb["on_end"](failed)
    assert view.wait(60) is failed and view.state == "FAILED" and view.summary


def test_a_page_that_says_hello_gets_the_lines_and_keeps_what_the_view_was_given_since() -> None:
    """A page's "hello" resends the kept lines; the widget's traits are already current and are
    not set again from the last status (they would undo a message set since, as the XSS browser
    test's second view sets one)."""
    running, _failed = statuses()
    watcher = FakeWatcher()
    job = fake_job(watcher)
    view = RecordingView(job)
    watcher.callbacks["on_status"](running)
    view.message = "cancel refused: not your job"
    view._on_front_end_msg(view, {"kind": "hello"}, [])
    assert view.message == "cancel refused: not your job"
    assert view.sent and view.sent[-1].get("reset") is True
