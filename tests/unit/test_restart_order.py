"""Issue 29 §5, pure parts: a batch of service log lines keeps each pod's lines together in
container-restart order, restart markers are rows of their own (never errors), and the local
tier tags lines with their replica's restart from the markers in its log."""

from __future__ import annotations

import random

from jupyter_tiers.app.viewstate.serve import line_rows, order_batch
from jupyter_tiers.core.model import PodLogLine
from jupyter_tiers.local.serve_watch import tag_restarts


def L(text: str, pod: str = "a", restart: int | None = None) -> PodLogLine:
    return PodLogLine(text, pod, "", restart)


def test_a_late_line_of_the_previous_run_goes_before_the_restart() -> None:
    batch = [L("Traceback", restart=1), L("— restart 2 —", restart=2), L("loading model config", restart=2),
             L("ValueError: bad", restart=1), L("b says", "b", 0), L("x", restart=None)]
    assert [ln.text for ln in order_batch(batch)] == [
        "Traceback", "ValueError: bad", "— restart 2 —", "loading model config", "x", "b says"]


def test_two_pods_tracebacks_do_not_interleave() -> None:
    batch = [L("Traceback", "a", 0), L("Traceback", "b", 0), L("  File x", "a", 0), L("  File y", "b", 0),
             L("ValueError", "a", 0), L("KeyError", "b", 0)]
    assert [(ln.pod, ln.text) for ln in order_batch(batch)] == [
        ("a", "Traceback"), ("a", "  File x"), ("a", "ValueError"),
        ("b", "Traceback"), ("b", "  File y"), ("b", "KeyError")]


def test_order_batch_keeps_every_line_and_each_pods_restarts_ascending() -> None:
    rng = random.Random(2029)
    for _ in range(300):
        n = rng.randint(0, 30)
        batch = [L(f"t{i}", rng.choice("abc"), rng.choice([None, 0, 1, 2])) for i in range(n)]
        out = order_batch(batch)
        assert sorted(out) == sorted(batch)
        for pod in "abc":
            known = [ln.restart for ln in out if ln.pod == pod and ln.restart is not None]
            assert known == sorted(known)


def test_marker_rows_are_not_errors() -> None:
    assert line_rows([L("— restart 2 —", restart=2), L("ValueError: x")]) == [
        ["a", "— restart 2 —", False], ["a", "ValueError: x", True]]


def test_tag_restarts_from_markers() -> None:
    state: dict[str, int | None] = {}
    lines = [L("one"), L("x", "b"), L("— restart 1 —"), L("two")]
    assert [ln.restart for ln in tag_restarts(lines, state, 0)] == [0, 0, 1, 1]
    assert [ln.restart for ln in tag_restarts([L("three"), L("y", "b")], state, 0)] == [1, 0]
    mid: dict[str, int | None] = {}
    tagged = tag_restarts([L("?"), L("— restart 4 —"), L("!")], mid, None)
    assert [ln.restart for ln in tagged] == [None, 4, 4]
