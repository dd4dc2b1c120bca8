"""Issue 36 §4: the parsers of text from outside (a job's log, the cluster's answers, a model's
stream) do work linear in what they read, and read normal text as before.

Each hostile input is read at two sizes, n and 4n, and the work is counted without a clock
(tests/hardening/work_counter.py: the interpreter's signal checks, which the regex engine makes
every few thousand of its steps): a linear parser's count grows about 4x and stays small, the
quadratic patterns these replace grew 16x into the thousands. Each changed pattern is also run
beside the one it replaced on a seeded fuzz of normal and odd text: the same matches.
"""

from __future__ import annotations

import random
import re
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from jupyter_tiers.batch import metrics
from jupyter_tiers.doctor import slurm_parse
from jupyter_tiers.k8s import errors as k8s_errors
from jupyter_tiers.serving import openai_compat, podusage
from jupyter_tiers.serving.openai_compat import SSEParser
from jupyter_tiers.slurm import parse as slurm_parse_text
from tests.hardening.work_counter import require_counting, work

SEED = 20260036

# The number pieces as they were: "\d+\.?\d*" lets the two digit runs trade digits, so a long
# run that is not followed by what the pattern wants is tried at every split (quadratic).
_OLD_NUM_PIECE = r"\d+\.?\d*"
_NEW_NUM_PIECE = r"\d+(?:\.\d*)?"


def _linear(measure: Callable[[int], int], n: int, budget: int) -> tuple[int, int]:
    """The work at n and 4n: grows at most ~4x (8x: slack for fixed costs) and stays in budget."""
    small, big = measure(n), measure(4 * n)
    assert big <= 8 * max(small, 1) + 8 and big <= budget, f"work {small} at n={n}, {big} at 4n"
    return small, big


@pytest.fixture(autouse=True)
def _counting() -> None:
    require_counting()


# --- a job's log: metrics and pod usage ------------------------------------------------------------

HOSTILE_METRIC_LINES: list[Callable[[str], str]] = [  # of a run of digits
    lambda d: f"loss={d}x",  # key=value (_PAIR_RE)
    lambda d: f"step {d}x",  # step N (_SPACE_RE)
    lambda d: f"lm loss: {d}x",  # Megatron's words (_TWO_WORD_RE)
    lambda d: f"{d}x it/s",  # a rate (_RATE_RE)
    lambda d: f"| loss | {d}x",  # a table row (_TABLE_RE)
    lambda d: f"'val_loss' reached {d}x",  # Lightning (_LIGHTNING_RE)
    lambda d: f"loss={d}.{d}x",
]


@pytest.mark.parametrize("shape", range(len(HOSTILE_METRIC_LINES)))
def test_a_long_digit_run_costs_linear_work(shape: int) -> None:
    parser = metrics.MetricParser()
    line_of = HOSTILE_METRIC_LINES[shape]
    parser.parse("loss=1.0")  # warm up: compiling a pattern is Python-level work
    # 1000 and 4000 digits (a line is read up to 4096 characters): was ~1500 -> ~23000.
    _linear(lambda n: work(lambda: parser.parse(line_of("1" * n))), 1000, budget=400)


def test_a_long_quantity_costs_linear_work() -> None:
    podusage.parse_quantity("1Mi")
    _linear(lambda n: work(lambda: podusage.parse_quantity("1" * n + "xyz")), 1000, budget=200)
    _linear(lambda n: work(lambda: podusage.parse_quantity(f"{'1' * n}.{'1' * n}xyz")), 1000, budget=200)


def _fuzz_lines(rng: random.Random, atoms: list[str], count: int = 3000) -> list[str]:
    return ["".join(rng.choice(atoms) for _ in range(rng.randint(0, 14))) for _ in range(count)]


def _same_matches(new: re.Pattern[str], old: re.Pattern[str], lines: list[str]) -> None:
    for line in lines:
        got = [(m.span(), m.groups()) for m in new.finditer(line)]
        want = [(m.span(), m.groups()) for m in old.finditer(line)]
        assert got == want, line
        for how in ("match", "fullmatch"):
            a, b = getattr(new, how)(line), getattr(old, how)(line)
            assert (a and (a.span(), a.groups())) == (b and (b.span(), b.groups())), (how, line)


def test_the_number_patterns_match_as_before() -> None:
    rng = random.Random(SEED)
    atoms = ["1", "23", "0", ".", "..", "5.", ".7", "e", "E-", "e+3", "-", "+", ",", ",123", "1,234", " ",
             "x", "loss", "loss=", "loss: ", "step ", "lm loss: ", "it/s", " tok/s", "| loss | ", " |",
             "'val_loss' reached ", "tensor(", "[", "nan", "inf", "'", '"', "=", ":", "/", "_",
             "Metric a improved", "New best score: "]
    lines = _fuzz_lines(rng, atoms)
    changed = [metrics._PAIR_RE, metrics._SPACE_RE, metrics._TWO_WORD_RE, metrics._RATE_RE,
               metrics._LIGHTNING_RE, metrics._TABLE_RE, podusage._QUANTITY_RE]
    for new in changed:
        assert _NEW_NUM_PIECE in new.pattern and _OLD_NUM_PIECE not in new.pattern
        old = re.compile(new.pattern.replace(_NEW_NUM_PIECE, _OLD_NUM_PIECE), new.flags)
        _same_matches(new, old, lines)
    parser = metrics.MetricParser()
    assert parser.parse("step 12 loss=0.25 lr: 3e-4 | 1,234 tok/s 5.5it/s") == {
        "step": 12.0, "loss": 0.25, "lr": 3e-4, "tokens/s": 234.0, "it/s": 5.5}  # a rate: digits, as ever


# --- the cluster's answers: scontrol records, hostlists, Kubernetes errors ------------------------

def test_a_long_word_in_a_partition_record_costs_linear_work() -> None:
    slurm_parse.parse_partitions(["PartitionName=a"])
    record = "PartitionName=p "
    _linear(lambda n: work(lambda: slurm_parse.parse_partitions([record + "x" * n])), 1000, budget=200)
    _linear(lambda n: work(lambda: slurm_parse.parse_partitions(["ab-" * n])), 1000, budget=200)


def test_a_long_dotted_path_in_an_api_error_costs_linear_work() -> None:
    def measure(n: int) -> int:
        body = {"kind": "Status", "message": ".t" * n + " then something else", "code": 500}
        return work(lambda: k8s_errors.api_error_message(500, body))

    _linear(measure, 1000, budget=200)


def test_the_cluster_patterns_match_as_before() -> None:
    rng = random.Random(SEED + 1)
    kv_atoms = ["a", "B_1", "=", "==", " ", "  ", "-", "x=y", "State=UP", "PartitionName=", "é", "\t", ".",
                ","]
    _same_matches(slurm_parse._KV_RE, re.compile(r"(\w+)=(\S*)"), _fuzz_lines(rng, kv_atoms))
    path_atoms = [".", "..", "spec", "[0]", "-", "_", "a", ": field not declared in schema", ": field", " ",
                  ":", "[", "]", "x.y", "/"]
    old = re.compile(r"(\.[\w.\[\]-]+): field not declared in schema")
    new = k8s_errors._UNKNOWN_FIELD
    for line in _fuzz_lines(rng, path_atoms):
        a, b = new.search(line), old.search(line)
        assert (a and a.group(1)) == (b and b.group(1)), line  # the field named is the same
    message = 'failed to create typed patch object: .spec.template.foo: field not declared in schema'
    assert "unknown field .spec.template.foo" in k8s_errors.api_error_message(500, {"message": message})


def test_hostlist_parts_are_as_before_and_read_once() -> None:
    old = re.compile(r"[^,\[]+(?:\[[^\]]*\])?[^,]*")
    rng = random.Random(SEED + 2)
    atoms = ["node", "gpu", "0", "1-3", "01-02", "7", ",", "[", "]", "-", "x", ",,", "[]", "a[b", "]c"]
    for text in _fuzz_lines(rng, atoms):
        assert slurm_parse_text._hostlist_parts(text) == old.findall(text), text
    assert slurm_parse_text.expand_hostlist("node[1-3,7],gpu[01-02],login") == [
        "node1", "node2", "node3", "node7", "gpu01", "gpu02", "login"]

    # The characters looked at: each a few times at most however many brackets are unclosed (the
    # pattern scanned to the end of the text for each one's "]", in a loop of the regex engine that
    # makes no signal check, so work() cannot see it; this counts the new scan's own reads).
    for text in ("a[," * 3000, "a[b]," * 3000 + "x[" * 3000, "[" * 9000, "a" * 9000):
        probe = _CountingStr(text)
        assert slurm_parse_text._hostlist_parts(probe) == old.findall(text)
        assert probe.looked <= 4 * len(text) + 8, (text[:20], probe.looked)


class _CountingStr(str):
    """A str that counts the characters its find/index/rfind calls and indexing look at."""

    looked = 0

    def __getitem__(self, key: Any) -> Any:
        self.looked += 1 if isinstance(key, int) else 0
        return str.__getitem__(self, key)

    def _scan(self, name: str, sub: str, start: int | None = None) -> int:
        found = getattr(str, name)(self, sub, *(() if start is None else (start,)))
        begin = start or 0
        self.looked += (len(self) if found < 0 else found + len(sub)) - begin if name != "rfind" else \
            len(self) - max(found, 0)
        return int(found)

    def find(self, sub: str, start: Any = None, end: Any = None) -> int:  # type: ignore[override]
        return self._scan("find", sub, start)

    def index(self, sub: str, start: Any = None, end: Any = None) -> int:  # type: ignore[override]
        return self._scan("index", sub, start)

    def rfind(self, sub: str, start: Any = None, end: Any = None) -> int:  # type: ignore[override]
        return self._scan("rfind", sub, start)


# --- a model's stream: Server-Sent Events ---------------------------------------------------------

def _copied_per_feed(pieces: list[bytes]) -> int:
    """The bytes allocated while the pieces are fed, summed feed by feed (tracemalloc's peak over
    what was held before each): the copying a parser does, however it does it."""
    parser = SSEParser()
    total = 0
    tracemalloc.start()
    try:
        for piece in pieces:
            before, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            parser.feed(piece)
            _, peak = tracemalloc.get_traced_memory()
            total += max(0, peak - before)
    finally:
        tracemalloc.stop()
    return total


def test_a_line_in_one_byte_pieces_is_not_copied_at_each_piece() -> None:
    def measure(n: int) -> int:
        stream = b"data: " + b"x" * n + b"\n\n"
        return _copied_per_feed([stream[i:i + 1] for i in range(len(stream))])

    small, big = measure(16_000), measure(64_000)
    # Joining each piece to the whole line so far copied n^2/2 bytes (2 GB at 64 KB); growing a
    # buffer in place allocates a few times the line.
    assert big <= 8 * small + 4096 and big <= 64 * 64_000, (small, big)


def test_each_byte_is_searched_for_a_line_end_once(monkeypatch: pytest.MonkeyPatch) -> None:
    searched = 0
    real = openai_compat._LINE_END

    class Counting:
        def search(self, buf: Any, pos: int = 0) -> Any:
            nonlocal searched
            found = real.search(buf, pos)
            searched += (found.end() if found else len(buf)) - pos
            return found

    monkeypatch.setattr(openai_compat, "_LINE_END", Counting())
    one_line = b"data: " + b"x" * 50_000 + b"\n\n"
    many_lines = b"data: a\r\n" * 20_000 + b"\n"  # a \r find from each line to the end was quadratic
    for stream, pieces in ((one_line, [one_line[i:i + 1] for i in range(len(one_line))]),
                           (many_lines, [many_lines]),
                           (many_lines, [many_lines[i:i + 7] for i in range(0, len(many_lines), 7)])):
        searched = 0
        parser = SSEParser()
        events = [event for piece in pieces for event in parser.feed(piece)]
        assert events and events[-1].data.startswith(("x", "a"))
        assert searched <= len(stream) + 2 * len(pieces), (len(stream), searched)
