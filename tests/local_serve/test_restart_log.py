"""Issue 29 §5 on the local serving tier: a crash-looping replica's log is in restart order, each
restart begins with a ``— restart N —`` marker (in the watch's lines and in ``svc.logs()``), and
every line says which restart it came from. One restart (the first back-off is 10 s)."""

from __future__ import annotations

import threading

from jupyter_tiers.core.model import PodLogLine
from jupyter_tiers.local.serve_tier import LocalServeTier

from .conftest import wait_for

BODY = """\
import os, sys
print("loading model config", flush=True)
def load():
    raise ValueError("bad config: " + os.environ.get("JT_REPLICA", "?"))
load()
"""


def test_restarts_are_marked_and_in_order(tier: LocalServeTier) -> None:
    svc = tier.apply(tier.make_spec(BODY, name="crashlog"))
    got: list[PodLogLine] = []
    lock = threading.Lock()

    def on_lines(lines: list[PodLogLine]) -> None:
        with lock:
            got.extend(lines)

    sub = svc.watch(on_lines=on_lines)
    try:
        def second_run() -> list[PodLogLine] | None:
            with lock:
                lines = list(got)
            texts = [ln.text for ln in lines]
            if "— restart 1 —" not in texts:
                return None
            after = texts[texts.index("— restart 1 —"):]
            return lines if any(t.startswith("ValueError") for t in after) else None

        lines = wait_for(second_run, "the first restart's traceback in the watched log", timeout=120)
    finally:
        sub.close()
    texts = [ln.text for ln in lines]
    mark = texts.index("— restart 1 —")
    first, second = lines[:mark], lines[mark + 1:]
    assert first[0].text == "loading model config"
    assert any(ln.text.startswith("ValueError: bad config") for ln in first), first
    assert {ln.restart for ln in first} == {0} and lines[mark].restart == 1
    assert second[0].text == "loading model config" and {ln.restart for ln in second} == {1}
    # the first run's traceback is whole before the marker: nothing of it after
    assert texts.count("Traceback (most recent call last):") >= 2
    assert texts.index("Traceback (most recent call last):") < mark
    pod = lines[mark].pod
    logged = svc.logs()
    assert f"{pod}: — restart 1 —\n{pod}: loading model config\n" in logged, logged
