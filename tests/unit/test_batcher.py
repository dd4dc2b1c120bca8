"""LineBatcher: a lone line goes at once, a fast stream is rate-limited, sends keep the newest lines
and account for every line, and a slow send does not stretch the interval.

No assertion depends on how fast this machine is: bounds are one-sided (a slow machine only makes
fewer messages) and the pacing rule is checked as the pure function it is."""

from __future__ import annotations

import threading
import time

import pytest

from jupyter_tiers.core.model import LogLine
from jupyter_tiers.faces.widgets.batcher import LineBatcher, pause_after_send


class Recorder:
    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.sent: list[tuple[float, list[LogLine], int]] = []
        self.got = threading.Event()
        self.entered = threading.Event()

    def __call__(self, lines: list[LogLine], skipped: int) -> None:
        self.entered.set()
        time.sleep(self.delay)
        self.sent.append((time.monotonic(), lines, skipped))
        self.got.set()


def _lines(start: int, n: int) -> list[LogLine]:
    return [LogLine(text=f"line {i}", rank=0, end_offset=i) for i in range(start, start + n)]


def test_a_lone_line_is_sent_without_waiting_for_company() -> None:
    rec = Recorder()
    b = LineBatcher(rec, interval=0.1)
    try:
        b.add(_lines(0, 1))
        assert rec.got.wait(30)  # a bound, not a speed check: it must come without more lines
        assert [ln.text for ln in rec.sent[0][1]] == ["line 0"]
    finally:
        b.close()


def test_fast_stream_is_rate_limited_keeps_newest_and_counts_the_rest() -> None:
    rec = Recorder()
    b = LineBatcher(rec, interval=0.5, max_lines=50)
    added = 0
    start = time.monotonic()
    while time.monotonic() - start < 1.0:
        b.add(_lines(added, 20))
        added += 20
        time.sleep(0.002)
    b.close()
    elapsed = time.monotonic() - start
    # At most one send per interval while running, plus the final one from close().
    assert len(rec.sent) <= elapsed / 0.5 + 2
    assert all(len(lines) <= 50 for _t, lines, _s in rec.sent)
    assert sum(len(lines) + skipped for _t, lines, skipped in rec.sent) == added
    last = rec.sent[-1][1]
    assert last[-1].text == f"line {added - 1}"  # the newest line is never the one dropped
    texts = [ln.text for _t, lines, _s in rec.sent for ln in lines]
    assert texts == sorted(texts, key=lambda t: int(t.split()[1]))  # never out of order


def test_close_waits_for_a_send_in_progress() -> None:
    rec = Recorder(delay=0.3)
    b = LineBatcher(rec, interval=0.05)
    b.add(_lines(0, 5))
    assert rec.entered.wait(30)  # the batcher's thread is now inside a (slow) send
    b.add(_lines(5, 5))
    b.close()
    assert sum(len(lines) for _t, lines, _s in rec.sent) == 10  # all there when close() returns


def test_the_send_time_counts_toward_the_interval() -> None:
    assert pause_after_send(0.125, started=10.0, now=10.05) == pytest.approx(0.075)
    assert pause_after_send(0.125, started=10.0, now=10.2) == 0.0  # a slow send: go at once
    assert pause_after_send(0.125, started=10.0, now=10.0) == 0.125
