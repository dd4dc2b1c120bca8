"""MetricsTracker.feed_sampled's fast path (a few substring searches over the whole batch, only
the lines around a hit split and checked; the rank's lines located from the end) against the
straightforward per-line reading, on seeded random batches."""

from __future__ import annotations

import random

from jupyter_tiers.batch.logs import split_log_line
from jupyter_tiers.batch.metrics import MetricsTracker


def _reference(tracker: MetricsTracker, text: str, budget: int, defer: bool) -> None:
    """Every line split and checked for an error, in order; the rank's last ``budget`` kept."""
    mine = []
    for raw in text.splitlines():
        rank, body = split_log_line(raw)
        tracker._check_error(body)
        if rank == tracker.rank or tracker.rank is None:
            mine.append(body)
    if defer:
        if mine:
            tracker._deferred = (tracker._deferred + mine)[-budget:]
        return
    tracker.flush_deferred()
    for body in mine[-budget:]:
        tracker._parse_into(body)


_BODIES = [
    "step={s} loss={v}", "loss=nan", "lr=3e-4 acc={v}", "plain text", "", "   ",
    "ValueError: bad {s}", "  torch.OutOfMemoryError: CUDA out of memory", "KeyboardInterrupt",
    "SystemExit", "Traceback (most recent call last):", "an Error happened", "Errors: 0",
    "error: disk full", "ERROR: bad", "[ERROR] not a report", "FATAL crash", "FATALITY",
    "Segmentation fault (core dumped)", "Segmentation", "oom-kill event", "OOM_Kill", "oom kill",
    "OOM-kill", "oom-Kill!", "room zoom", "skill", "Out Of Memory", "Out of memory", "Killed job",
    "Killed", "Killedx", "srun: error: node1: task 0: Killed", "err: RROR:", "a:ERROR: b",
    "Exited with exit code 1", "Exit code 3",
    "— restart 1 —", "— restart 12 —", "— restart x —", "  — restart 3 — ", "x — restart 2 —",
    "Failure: {s}", "AssertionError", "Epoch 0: 50%|█████ | {s}/9 [loss={v}]",
]
_PREFIXES = ["0: ", "0:", "1: ", "7: ", "00: ", "07:", "007: ", "", "x: ", "1234567: ", "12345678: "]
_BREAKS = ["\n"] * 12 + ["\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1e", "\x85", "\u2028", "\u2029", "\n\n"]


def _batch(rng: random.Random) -> str:
    parts = []
    for s in range(rng.randint(0, 50)):
        body = rng.choice(_BODIES).format(s=s, v=rng.random())
        if rng.random() < 0.1:  # an error word inside a longer line, or two pieces in one line
            body = rng.choice(_BODIES).format(s=s, v=0.5) + rng.choice([" ", "\r", "\u2028"]) + body
        parts.append(rng.choice(_PREFIXES) + body + rng.choice(_BREAKS))
    text = "".join(parts)
    return text[:-1] if text and rng.random() < 0.2 else text  # a last line without its break


def _state(t: MetricsTracker) -> tuple[object, ...]:
    return (t.first_error, t._other_error, t.error, t._deferred, t.step, str(t.to_lists()),
            str(t.last_values()))


def test_fast_path_matches_per_line_reading_fuzz() -> None:
    rng = random.Random(4242)
    for _ in range(600):
        rank = rng.choice([0, 0, 1, 7, None])
        fast = MetricsTracker(rank=rank, max_points=16)
        slow = MetricsTracker(rank=rank, max_points=16)
        if rng.random() < 0.3:  # an error already found, or only a non-exception one
            fast.first_error = slow.first_error = rng.choice(["ValueError: before", None])
            fast._other_error = slow._other_error = "error: before"
        for _batch_no in range(rng.randint(1, 8)):
            text = _batch(rng)
            budget = rng.randint(1, 12)
            defer = rng.random() < 0.4
            fast.feed_sampled(text, budget, defer=defer)
            _reference(slow, text, budget, defer)
            assert _state(fast) == _state(slow), text
        fast.flush_deferred()
        slow.flush_deferred()
        assert _state(fast) == _state(slow)


def test_first_error_after_a_restart_in_the_same_batch() -> None:
    """Once an error is known only restart markers are searched for; a marker reopens the search
    for the lines after it within the same batch."""
    t = MetricsTracker(rank=0)
    t.feed_sampled("0: ValueError: first run\n0: step=1 loss=2\n")
    assert t.error == "ValueError: first run"
    t.feed_sampled("0: KeyError: ignored\n— restart 1 —\n1: step=1\n3: RuntimeError: second run\n0: loss=1\n")
    assert t.error == "RuntimeError: second run"
    assert t.last_values() == {"step": 1.0, "loss": 1.0}


def test_anchored_find_is_str_find_fuzz() -> None:
    """The anchor-first search finds exactly what ``str.find`` finds, for every needle."""
    from jupyter_tiers.batch.metrics import _ALL_NEEDLES, _ANCHORS, _find

    assert set(_ANCHORS) <= set(_ALL_NEEDLES)
    rng = random.Random(77)
    alphabet = "xkKRLSMIFEO—rtoa \n:-" + "".join(sorted(set("".join(_ALL_NEEDLES))))
    for _ in range(3000):
        parts = [rng.choice(alphabet) for _ in range(rng.randint(0, 40))]
        for _ in range(rng.randint(0, 3)):
            parts.insert(rng.randint(0, len(parts)), rng.choice(_ALL_NEEDLES))
        text = "".join(parts)
        needle = rng.choice(_ALL_NEEDLES)
        pos = rng.randint(0, len(text) + 1)
        assert _find(text, needle, pos) == text.find(needle, pos), (text, needle, pos)
