"""ServeView's pod table and header while a canary runs (issue 29 §3), drawn by serve_view.js in
node on a small stand-in DOM from the traits viewstate.serve computes: both revisions' pods, each
marked with its track, and the header counting both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jupyter_tiers.app.viewstate.schema import ServeViewState, defaults
from jupyter_tiers.app.viewstate.serve import status_traits
from jupyter_tiers.core.model import PodInfo, ServiceState, ServiceStatus
from jupyter_tiers.serving.status import with_canary
from tests.unit.widget_js import run_module

NOW = 1_700_000_000.0

SCRIPT = (Path(__file__).parent / "serve_view_dom.js").read_text(encoding="utf-8")


def drawn(status: ServiceStatus) -> Any:
    traits = {**defaults(ServeViewState), "service_name": "web", "profile": "p", **status_traits(status, NOW)}
    return run_module(SCRIPT.replace("__TRAITS__", json.dumps(traits)), "ServeView canary pods")


def test_both_tracks_pods_are_shown_marked_and_counted() -> None:
    stable = ServiceStatus("web", ServiceState.READY, desired=1, updated=1, ready=1, available=1,
                           pods=(PodInfo("web-aaa-1", phase="Running", ready=True, revision="aaa"),))
    canary = ServiceStatus("web", ServiceState.READY, desired=1, updated=1, ready=1, available=1,
                           pods=(PodInfo("web-canary-bbb-1", phase="Running", ready=True, revision="bbb"),))
    shown = drawn(with_canary(stable, 50, canary))
    assert shown["header"] == "READY 2/2 (stable 1/1 · canary 1/1)"
    assert shown["rows"] == [["web-aaa-1", "stable", True, False], ["web-canary-bbb-1", "canary", True, True]]


def test_without_a_canary_the_track_column_stays_hidden() -> None:
    plain = ServiceStatus("web", ServiceState.READY, desired=2, updated=2, ready=2, available=2,
                          pods=(PodInfo("web-a", ready=True), PodInfo("web-b", ready=True)))
    shown = drawn(plain)
    assert shown["header"] == "READY 2/2"
    assert shown["rows"] == [["web-a", "", False, False], ["web-b", "", False, False]]
