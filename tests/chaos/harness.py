"""The chaos harness's plain parts: the numbered-line ledger check, an outcome per scenario and
the table bench/chaos.py prints.

A scenario (tests/chaos/scenarios_*.py) runs a workload, injects faults from the outside as its
plan in tests/chaos/schedules.py draws them from the seed (each inside its target's span), then
checks invariants and returns an :class:`Outcome`; tests/chaos/ asserts on outcomes,
bench/chaos.py prints them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")


@dataclass
class Outcome:
    """What one scenario saw. ``problems`` says in words what each loss or wrong state was;
    ``missed`` what each undelivered fault was (one that found its target already ended: a fault
    of the harness's schedule, not a state of the product)."""

    scenario: str
    faults: int = 0
    undelivered: int = 0
    checked: int = 0  # log lines, registry records or events checked
    lost: int = 0
    duplicated: int = 0
    wrong_states: int = 0
    recover_s: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """Nothing lost, repeated or wrong (undelivered faults are the harness's, not counted)."""
        return not (self.lost or self.duplicated or self.wrong_states or self.problems)

    @property
    def delivered_all(self) -> bool:
        return not self.undelivered

    def undelivered_fault(self, what: str) -> None:
        """One scheduled fault that could not be delivered, said in words."""
        self.undelivered += 1
        self.missed.append(what)

    def wrong(self, what: str) -> None:
        """One wrong state, said in words."""
        self.wrong_states += 1
        self.problems.append(what)


@dataclass(frozen=True)
class SequenceCheck:
    """Numbered lines as one reader saw them, against what the writer wrote."""

    lost: int  # numbers written but never seen
    duplicated: int  # numbers seen more than once
    out_of_order: int  # a number seen after a larger one

    @property
    def clean(self) -> bool:
        return not (self.lost or self.duplicated or self.out_of_order)


def check_sequence(seen: Sequence[int], written: int) -> SequenceCheck:
    """``seen``: the numbers of the lines a reader got, in arrival order; the writer wrote
    0..written-1. Numbers at or beyond ``written`` are not counted lost (written later)."""
    counts: dict[int, int] = {}
    out_of_order = 0
    top = -1
    for n in seen:
        counts[n] = counts.get(n, 0) + 1
        if n < top:
            out_of_order += 1
        top = max(top, n)
    lost = sum(1 for n in range(written) if n not in counts)
    duplicated = sum(c - 1 for c in counts.values())
    return SequenceCheck(lost, duplicated, out_of_order)


def percentile(values: Sequence[float], p: float) -> float | None:
    """The ``p``-th percentile (nearest rank) of ``values``; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


COLUMNS = ("scenario", "faults", "undelivered", "checked", "lost", "duplicated", "wrong states",
           "recover p50", "recover p99")


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def table(outcomes: Iterable[Outcome]) -> str:
    """The outcomes as a Markdown table (README-ready)."""
    rows = [COLUMNS]
    for o in outcomes:
        rows.append((o.scenario, str(o.faults), str(o.undelivered), str(o.checked), str(o.lost),
                     str(o.duplicated), str(o.wrong_states), _seconds(percentile(o.recover_s, 50)),
                     _seconds(percentile(o.recover_s, 99))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]

    def line(row: Sequence[str]) -> str:
        return "| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) + " |"

    out = [line(rows[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in rows[1:]]
    return "\n".join(out)


def wait_until(cond: Callable[[], T | None], timeout: float, interval: float = 0.05) -> T | None:
    """Poll ``cond`` until it returns something truthy (returned), or None after ``timeout``.
    Bounds a wait so that a broken component fails the scenario instead of hanging it."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            return None
        time.sleep(interval)
