"""LogBatch and the widget's batch message: lines stay bytes until used, and every view of a batch
(its LogLines, its tail, its text, the front end's error indices) agrees with decoding line by
line. Seeded fuzz against split_log_line and ERROR_RE; one long line decodes in linear time
(checked by counting work, not by timing)."""

from __future__ import annotations

import random

from jupyter_tiers.app.viewstate.job import ERROR_RE, error_lines, lines_message, message_rows
from jupyter_tiers.batch.logs import LogBatch, LogDecoder, split_log_line
from jupyter_tiers.core.model import LogLine
from jupyter_tiers.faces.widgets.batcher import LineBatcher

WORDS = ["loss", "ü", "✓", "Error", "ValueError:", "error:", "FATAL", "Traceback (most recent call last)",
         "", " ", "\r", "12", ":", "é", "Segmentation fault", "xException"]


def _random_log(rng: random.Random, lines: int) -> bytes:
    out = []
    for _ in range(lines):
        rank = rng.choice([None, 0, 3, 17, 12345678])
        text = "".join(rng.choice(WORDS) for _ in range(rng.randint(0, 5)))
        sep = rng.choice([": ", ":", ": "])
        out.append(text if rank is None else f"{rank}{sep}{text}")
    return ("\n".join(out) + "\n").encode() if out else b""


def _by_line(data: bytes) -> list[tuple[int | None, str]]:
    return [split_log_line(raw.decode("utf-8", "replace").rstrip("\r"))
            for raw in data.split(b"\n")[:-1]]


def test_batch_is_a_sequence_of_the_lines_decoded_one_by_one() -> None:
    rng = random.Random(91)
    for _ in range(300):
        data = _random_log(rng, rng.randint(0, 30))
        batch = LogDecoder(100).feed(data)
        assert len(batch) == data.count(b"\n")
        assert [(ln.rank, ln.text) for ln in batch] == _by_line(data)
        assert batch.end == 100 + len(data) and batch.start == 100
        if batch:
            assert batch[-1].end_offset == batch.end
            assert batch[0] == next(iter(batch))


def test_tail_keeps_the_last_lines_as_bytes() -> None:
    rng = random.Random(5)
    for _ in range(300):
        data = _random_log(rng, rng.randint(0, 20))
        batch = LogBatch(data, len(data))
        n = rng.randint(0, 25)
        tail = batch[max(0, len(batch) - n):]
        assert isinstance(tail, LogBatch)
        assert list(tail) == list(batch)[len(batch) - min(n, len(batch)):]
        assert tail.end == batch.end
        if tail:
            assert tail.data.endswith(b"\n") and data.endswith(tail.data)


def test_error_indices_match_the_per_line_test() -> None:
    rng = random.Random(2026)
    for _ in range(500):
        data = _random_log(rng, rng.randint(0, 30))
        text = LogBatch(data, len(data)).text
        expected = [i for i, (_rank, line) in enumerate(_by_line(data)) if ERROR_RE.search(line)]
        assert error_lines(text) == expected, text


def test_lines_message_joins_batches_and_a_final_line_without_newline() -> None:
    dec = LogDecoder()
    first = dec.feed(b"0: a\n1: ValueError: x\n2: partial")
    last = dec.flush()
    msg = lines_message([first, last], 3)
    assert msg == {"kind": "lines", "text": "0: a\n1: ValueError: x\n2: partial\n", "errors": [1],
                   "skipped": 3}


def test_batcher_keeps_batches_whole_and_trims_the_oldest() -> None:
    sent: list[tuple[list[LogBatch], int]] = []
    b: LineBatcher[LogLine] = LineBatcher(lambda parts, skipped: sent.append((parts, skipped)),
                                          interval=3600, max_lines=5, join=list)
    b.add(LogBatch(b"0: a\n0: b\n0: c\n", 15))
    b.add(LogBatch(b"1: d\n1: e\n1: f\n1: g\n", 35))
    b.close()
    lines = [ln.text for part in sent[-1][0] for ln in part]
    kept_and_skipped = sum(len(p) for parts, _ in sent for p in parts) + sum(s for _, s in sent)
    assert kept_and_skipped == 7
    assert lines[-4:] == ["d", "e", "f", "g"]
    assert all(isinstance(p, LogBatch) for parts, _ in sent for p in parts)


def test_one_huge_line_is_joined_once() -> None:
    """The held bytes of an unfinished line are joined once, when it ends (was: re-copied on
    every chunk, quadratic). Counted by the bytes the decoder copies, not by time."""
    dec = LogDecoder()
    chunk = b"x" * 32768
    for _ in range(512):  # 16 MiB without a newline
        assert not dec.feed(chunk)
    assert dec.received == 512 * 32768 and dec.offset == 0
    assert len(dec._pending) == 512  # kept as the chunks themselves, not one growing copy
    batch = dec.feed(b"\n0: next\n")
    assert len(batch) == 2 and len(batch.data) == 512 * 32768 + len(b"\n0: next\n")
    assert batch[0].rank is None and len(batch[0].text) == 512 * 32768


def test_message_rows_read_a_message_as_the_front_end_does() -> None:
    rng = random.Random(44)
    for _ in range(200):
        data = _random_log(rng, rng.randint(0, 20))
        msg = lines_message([LogBatch(data, len(data))], 0)
        rows = message_rows(msg)
        assert [(r, t) for r, t, _e in rows] == _by_line(data)
        assert [i for i, (_r, _t, e) in enumerate(rows) if e] == msg["errors"]
