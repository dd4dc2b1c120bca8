"""JobView's summary and charts read every log line the follower delivers, not only the lines the
display's batcher keeps: when other ranks' lines crowd rank 0's last lines out of a message (the
batcher keeps each message's newest ``max_lines``), the summary still names rank 0's final metric.

Deterministic: the view's first message is held in ``send`` while the later batches arrive, so
they wait in the batcher together and the trimming happens in ``add``, whatever the timing."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from jupyter_tiers.batch.logs import LogDecoder
from jupyter_tiers.core.model import JobState, JobStatus
from jupyter_tiers.engine.rank_metrics import RankMetrics
from jupyter_tiers.engine.subscription import Subscription
from jupyter_tiers.engine.watch import deliver_batch
from jupyter_tiers.faces.widgets.job_view import JobView


class FakeWatcher:
    """Hands the test the view's callbacks instead of following a real job. ``on_lines`` is
    wrapped as the log follower delivers a batch (watch.deliver_batch): the view's ``metrics``
    read it first."""

    def __init__(self) -> None:
        self.callbacks: dict[str, Any] = {}
        self.metrics: RankMetrics | None = None

    def watch(self, on_status: Any = None, **kwargs: Any) -> Subscription[JobStatus]:
        metrics, on_lines = kwargs.pop("metrics", None), kwargs.pop("on_lines", None)
        self.callbacks = {"on_status": on_status, **kwargs}
        self.metrics = metrics
        if on_lines is not None:
            self.callbacks["on_lines"] = lambda lines: deliver_batch(lines, on_lines, metrics)
        return Subscription(SimpleNamespace(key="local:1"), on_status)


def live_metrics(patterns: Any = ()) -> Any:
    """A fake job's ``live_metrics`` (the real RankMetrics with these patterns)."""
    return lambda max_points=200: RankMetrics(patterns, max_points=max_points)


class HeldView(JobView):
    """A JobView without a front end whose first message waits until ``release`` is set."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.release = threading.Event()
        self.sending = threading.Event()
        self.messages: list[Any] = []
        super().__init__(*args, **kwargs)

    def send(self, content: Any, buffers: Any = None) -> None:
        self.messages.append(content)
        if len(self.messages) == 1:
            self.sending.set()
            assert self.release.wait(60)


def fake_job(watcher: FakeWatcher) -> Any:
    record = SimpleNamespace(profile="p", tier="local", world_size=2, spec={"nodes": 2}, key="local:1",
                             jobdir="")
    return SimpleNamespace(id="1", name="crowded", record=record, script="", tier=SimpleNamespace(),
                           metric_patterns=lambda: (), live_metrics=live_metrics(), watch=watcher.watch,
                           efficiency=lambda status, accounting=True: None)  # nothing sampled


def test_summary_has_rank0_final_metric_when_other_ranks_crowd_it_out() -> None:
    watcher = FakeWatcher()
    view = HeldView(fake_job(watcher))
    on_lines, on_end = watcher.callbacks["on_lines"], watcher.callbacks["on_end"]
    decoder = LogDecoder(0)
    on_lines(decoder.feed(b"1: warming up\n"))
    assert view.sending.wait(60)  # the batcher's thread is now inside send with that line
    rank0 = "".join(f"0: step={s} loss={1.0 / s:.6f}\n" for s in range(1, 101)) + "0: loss=nan\n"
    on_lines(decoder.feed(rank0.encode()))
    crowd = "".join(f"1: step={s} loss={100 + 1.0 / s:.6f}\n" for s in range(1, view._batcher.max_lines + 2))
    on_lines(decoder.feed(crowd.encode()))
    view.release.set()
    on_end(JobStatus("1", JobState.COMPLETED, elapsed_s=3, world_size=2))
    # The display did drop rank 0's lines (the point of this test's setup)...
    last = view.messages[-1]
    assert last["skipped"] > 0 and "0: loss=nan" not in last["text"]
    # ...but the summary and the chart read them.
    assert view.summary.endswith(" — loss nan"), view.summary
    loss = view.metrics["loss"]
    assert loss[-1][1] is None and max(y for _, y in loss if y is not None) <= 1.0
    view.close()


def test_a_job_view_charts_what_its_follower_parsed_and_parses_no_line_itself() -> None:
    """Issue 27: metric points are parsed once, where the log is read. The view hands its watch
    the RankMetrics it charts; a batch given to the view alone (not through the follower)
    shows in its log but never in its charts."""
    watcher = FakeWatcher()
    view = HeldView(fake_job(watcher))
    view.release.set()
    assert watcher.metrics is view._metrics
    decoder = LogDecoder(0)
    view._on_lines(decoder.feed(b"0: step=1 loss=0.5\n"))  # straight to the view
    watcher.callbacks["on_lines"](decoder.feed(b"0: step=2 loss=0.25\n"))  # as the follower gives it
    watcher.callbacks["on_end"](JobStatus("1", JobState.COMPLETED, elapsed_s=3, world_size=2))
    assert view.wait(60) is not None
    assert view.lines_received == 2  # both lines shown...
    assert view.metrics["loss"] == [[2.0, 0.25]], view.metrics  # ...one charted: the follower's
    assert view.summary.endswith(" — loss 0.25"), view.summary
    view.close()


def _reference_feed_sampled(tracker: Any, text: str, budget: int) -> None:
    """feed_sampled as it was before its shortcut: every line split and checked for errors."""
    from jupyter_tiers.batch.logs import split_log_line

    mine = []
    for raw in text.splitlines():
        rank, body = split_log_line(raw)
        tracker._check_error(body)
        if rank == tracker.rank or tracker.rank is None:
            mine.append(body)
    for body in mine[-budget:]:
        tracker._parse_into(body)


def test_feed_sampled_shortcut_fuzz() -> None:
    """Seeded fuzz: the shortcut (no line can change the error, so read back only to the budget)
    gives the same series, last values and errors as reading every line."""
    import random

    from jupyter_tiers.batch.metrics import MetricsTracker

    rng = random.Random(20261203)
    pieces = ["step={s} loss={v}", "loss=nan", "lr=3e-4 acc={v}", "ValueError: bad {s}", "error: disk",
              "— restart 1 —", "plain text", "Killed", "epoch {s}\rloss={v}", ""]
    for _ in range(300):
        rank = rng.choice([0, 1, 7, None])
        fast = MetricsTracker(rank=rank, max_points=16)
        slow = MetricsTracker(rank=rank, max_points=16)
        for _batch in range(rng.randint(1, 6)):
            lines = []
            for s in range(rng.randint(0, 40)):
                prefix = rng.choice(["0: ", "1: ", "7: ", "00: ", "07:", "", "x: ", "1234567: "])
                lines.append(prefix + rng.choice(pieces).format(s=s, v=rng.random()))
            text = "\n".join(lines) + rng.choice(["\n", ""])
            budget = rng.randint(1, 12)
            fast.feed_sampled(text, budget)
            _reference_feed_sampled(slow, text, budget)
        assert fast.to_lists() == slow.to_lists() or str(fast.to_lists()) == str(slow.to_lists())
        assert (fast.error, fast.step) == (slow.error, slow.step)


def test_feed_sampled_defer_fuzz() -> None:
    """Seeded fuzz: deferring some blocks (a view fed many a second) never changes the errors
    found, and after the last block (or flush_deferred) the last values are the reference's for
    every key of that block's parsed lines."""
    import random

    from jupyter_tiers.batch.metrics import MetricsTracker

    rng = random.Random(125)
    pieces = ["step={s} loss={v}", "loss=nan", "acc={v}", "RuntimeError: x {s}", "— restart 2 —", "text"]
    for _ in range(300):
        deferring = MetricsTracker(rank=0, max_points=16)
        slow = MetricsTracker(rank=0, max_points=16)
        for _batch in range(rng.randint(1, 6)):
            text = "".join(rng.choice(["0: ", "1: "]) + rng.choice(pieces).format(s=s, v=rng.random()) + "\n"
                           for s in range(rng.randint(0, 30)))
            deferring.feed_sampled(text, 5, defer=rng.random() < 0.6)
            _reference_feed_sampled(slow, text, 5)
            assert deferring.error == slow.error
        deferring.flush_deferred()
        tail = [ln for ln in text.splitlines() if ln.startswith("0: ")][-5:]
        for key in {k for ln in tail for k in slow.parser.parse(ln[3:])}:
            assert str(deferring.series[key].last) == str(slow.series[key].last), key


def test_deferred_blocks_of_a_slow_log_lose_no_point() -> None:
    """A log slower than the parse rate (one line per batch, several batches deferred in a row,
    as when the kernel is busy) keeps every step on the chart: deferred blocks add up, within
    the budget, instead of the last one replacing the others (a point went missing in CI)."""
    from jupyter_tiers.batch.metrics import MetricsTracker

    tracker = MetricsTracker(rank=0, max_points=200)
    for step in range(1, 21):
        text = f"0: step={step} loss={1 / step:.4f}\n1: step={step} loss={10 + 1 / step:.4f}\n"
        tracker.feed_sampled(text, 20, defer=step % 4 != 0)  # three deferred, then one parsed
    tracker.flush_deferred()
    xs, ys = tracker.series["loss"].xs, tracker.series["loss"].ys
    assert list(xs) == [float(s) for s in range(1, 21)]
    assert ys[-1] == 0.05 and max(ys) == 1.0
