"""LineBatcher: a lone line goes at once, a fast stream is rate-limited, sends keep the newest lines,
and a slow send does not stretch the interval."""

from __future__ import annotations

import threading
import time

from jupyter_tiers.model import LogLine
from jupyter_tiers.widgets.batcher import LineBatcher

SLACK = 0.1  # seconds of scheduling slack for a loaded test machine


class Recorder:
    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.sent: list[tuple[float, list[LogLine], int]] = []
        self.got = threading.Event()

    def __call__(self, lines: list[LogLine], skipped: int) -> None:
        time.sleep(self.delay)
        self.sent.append((time.monotonic(), lines, skipped))
        self.got.set()


def _lines(start: int, n: int) -> list[LogLine]:
    return [LogLine(text=f"line {i}", rank=0, end_offset=i) for i in range(start, start + n)]


def test_a_lone_line_is_sent_at_once() -> None:
    rec = Recorder()
    b = LineBatcher(rec)
    try:
        time.sleep(0.3)
        start = time.monotonic()
        b.add(_lines(0, 1))
        assert rec.got.wait(5)
        assert rec.sent[0][0] - start < SLACK
        assert [ln.text for ln in rec.sent[0][1]] == ["line 0"]
    finally:
        b.close()


def test_fast_stream_is_rate_limited_keeps_newest_and_counts_the_rest() -> None:
    rec = Recorder()
    b = LineBatcher(rec, interval=0.1, max_lines=50)
    added = 0
    start = time.monotonic()
    while time.monotonic() - start < 1.0:
        b.add(_lines(added, 20))
        added += 20
        time.sleep(0.002)
    b.close()
    window = rec.sent[-1][0] - rec.sent[0][0]
    assert (len(rec.sent) - 1) / window <= 1 / 0.1 * 1.05
    assert all(len(lines) <= 50 for _t, lines, _s in rec.sent)
    assert sum(len(lines) + skipped for _t, lines, skipped in rec.sent) == added
    last = rec.sent[-1][1]
    assert last[-1].text == f"line {added - 1}"  # the newest line is never the one dropped


def test_a_slow_send_does_not_add_to_the_wait() -> None:
    # Sends take 60 ms; with a 100 ms interval counted from each send's start, messages still
    # start ~100 ms apart (not 160), so a line waits at most about interval + one send.
    rec = Recorder(delay=0.06)
    b = LineBatcher(rec, interval=0.1)
    start = time.monotonic()
    while time.monotonic() - start < 1.0:
        b.add(_lines(0, 1))
        time.sleep(0.005)
    b.close()
    gaps = [b_[0] - a[0] for a, b_ in zip(rec.sent, rec.sent[1:-1], strict=False)]
    assert gaps and sorted(gaps)[len(gaps) // 2] < 0.1 + SLACK / 2
