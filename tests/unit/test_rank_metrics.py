"""RankMetrics: the job view's charts follow a picked rank (its history read from the log up to
where the live feed is, then the batches that came meanwhile), while rank 0 keeps feeding the
summary. The log reader here is a list of byte chunks: the reading and switching is pure."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from jupyter_tiers.batch.metrics import MetricsTracker
from jupyter_tiers.core.errors import TiersError
from jupyter_tiers.engine.rank_metrics import RankMetrics, read_history


def log(steps: range, ranks: int = 2) -> bytes:
    return "".join(f"{r}: step={s} loss={s + 100 * r}\n" for s in steps for r in range(ranks)).encode()


def chunks(data: bytes, size: int = 7) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i:i + size]


def last_loss(m: RankMetrics) -> float | None:
    _rank, _note, data = m.snapshot()
    pts = data.get("loss") or []
    return pts[-1][1] if pts else None


def test_read_history_stops_at_the_offset_and_splits_chunks_anywhere() -> None:
    data = log(range(1, 11)) + log(range(11, 13))
    upto = len(log(range(1, 11)))
    t = MetricsTracker(rank=1)
    assert read_history(t, chunks(data, 5), upto) == upto
    assert t.series["loss"].count == 10 and t.series["loss"].last == 110  # rank 1's, up to step 10
    t2 = MetricsTracker(rank=0)
    read_history(t2, iter(["é loss=3\n".encode()[i:i + 1] for i in range(10)]), 100)  # a split é
    assert t2.series == {}  # no rank prefix: not rank 0's line
    t3 = MetricsTracker(rank=None)
    read_history(t3, chunks(b"loss=1\nloss=2", 3), 1000)  # a last line without newline
    assert t3.series["loss"].last == 2


def test_pick_reads_the_history_then_the_batches_that_came_meanwhile() -> None:
    m = RankMetrics()
    first = log(range(1, 6))
    m.feed(first.decode(), len(first))
    assert last_loss(m) == 5 and m.rank == 0
    gate = threading.Event()
    ready = threading.Event()

    def slow_reader() -> Iterator[bytes]:
        gate.wait(30)
        yield first + log(range(6, 8))  # the file has grown past the offset already

    thread = m.pick(1, slow_reader, ready.set)
    assert thread is not None and m.wanted == 1 and m.rank == 0
    later = log(range(6, 8))
    m.feed(later.decode(), len(first) + len(later))  # arrives during the read: rank 0 still charted
    assert last_loss(m) == 7
    gate.set()
    thread.join(30)
    assert ready.is_set() and m.rank == 1
    rank, note, data = m.snapshot()
    assert rank == 1 and note == ""
    assert [y for _x, y in data["loss"]] == [101, 102, 103, 104, 105, 106, 107]  # each reading once
    assert m.summary.series["loss"].last == 7  # rank 0 still feeds the summary
    m.feed(log(range(8, 9)).decode(), None)
    assert last_loss(m) == 108
    calls: list[int] = []
    assert m.pick(0, lambda: iter(()), lambda: calls.append(m.rank)) is None  # rank 0: at once
    assert calls == [0] and last_loss(m) == 8


def test_a_later_pick_wins_and_a_failed_read_is_noted() -> None:
    m = RankMetrics()
    data = log(range(1, 4), ranks=3)
    m.feed(data.decode(), len(data))
    gate = threading.Event()

    def blocked() -> Iterator[bytes]:
        gate.wait(30)
        yield data

    stale = m.pick(1, blocked, lambda: None)
    done = threading.Event()

    def broken() -> Iterator[bytes]:
        raise TiersError("log not readable")
        yield b""  # pragma: no cover

    fresh = m.pick(2, broken, done.set)
    assert fresh is not None and stale is not None
    fresh.join(30)
    gate.set()
    stale.join(30)
    assert done.is_set() and m.rank == 2  # rank 1's late result was dropped
    rank, note, _data = m.snapshot()
    assert rank == 2 and "could not be read (log not readable)" in note
    m.feed(log(range(4, 5), ranks=3).decode(), None)
    assert last_loss(m) == 204  # live values still come


def test_a_reattached_view_reads_history_up_to_its_start_offset() -> None:
    m = RankMetrics()
    data = log(range(1, 4))
    m.start_at(len(data))  # the view skipped these bytes
    got = threading.Event()
    thread = m.pick(1, lambda: chunks(data), got.set)
    assert thread is not None
    thread.join(30)
    assert got.is_set() and last_loss(m) == 103


def test_batches_during_a_history_read_are_bounded() -> None:
    """A fast log while a rank's history is read: only that rank's last lines of each batch, and
    only the newest PENDING_BATCHES batches, are held."""
    from jupyter_tiers.engine.rank_metrics import PENDING_BATCHES, PENDING_LINES

    m = RankMetrics()
    gate = threading.Event()

    def blocked() -> Iterator[bytes]:
        gate.wait(30)
        return iter(())

    thread = m.pick(1, blocked, lambda: None)
    assert thread is not None
    step = 0
    for _ in range(PENDING_BATCHES + 50):
        batch = log(range(step, step + 300), ranks=3)
        step += 300
        m.feed(batch.decode(), None)
    held = list(m._pending or [])
    assert len(held) == PENDING_BATCHES
    assert all(len(text.splitlines()) == PENDING_LINES for text in held)
    assert all(line.startswith("1: ") for text in held for line in text.splitlines())
    gate.set()
    thread.join(30)
    assert m.rank == 1 and m.chart.series["loss"].last == step - 1 + 100  # the newest reading
