"""jupyter_tiers/widgets/views.json, the one list of the files each view's ES module is made of
(in order: they call each other through globals), read by the widgets (view_common.py) and the
lab panel's build (labextension/scripts/views.mjs)."""

from __future__ import annotations

import json
from pathlib import Path

from jupyter_tiers.widgets.array_view import ArrayTable
from jupyter_tiers.widgets.job_view import JobView
from jupyter_tiers.widgets.serve_view import ServeView
from jupyter_tiers.widgets.view_common import module_files, view_module

WIDGETS = Path(__file__).resolve().parents[2] / "jupyter_tiers" / "widgets"
MANIFEST = json.loads((WIDGETS / "views.json").read_text(encoding="utf-8"))


def test_every_listed_file_exists_and_every_js_file_is_listed() -> None:
    listed = {MANIFEST["common"]}
    for name, view in MANIFEST["views"].items():
        listed |= {name, *view["helpers"]}
        assert set(view["lab_panel_omits"]) <= set(view["helpers"]), name
    assert all((WIDGETS / f).is_file() for f in listed)
    assert listed == {p.name for p in WIDGETS.glob("*.js")}


def test_a_module_is_its_helpers_then_the_common_helpers_then_the_view() -> None:
    assert module_files("job_view.js") == ["metrics_chart.js", "rank_grid.js", "files_pane.js",
                                           "view_common.js", "job_view.js"]
    assert module_files("job_view.js", lab_panel=True) == ["rank_grid.js", "files_pane.js",
                                                           "view_common.js", "job_view.js"]
    assert module_files("serve_view.js", lab_panel=True) == ["view_common.js", "serve_view.js"]
    text = view_module("serve_view.js")
    starts = [text.index((WIDGETS / f).read_text(encoding="utf-8")) for f in module_files("serve_view.js")]
    assert starts == sorted(starts) and starts[0] == 0


def test_the_widgets_load_the_listed_modules() -> None:
    assert JobView._esm == view_module("job_view.js")
    assert ServeView._esm == view_module("serve_view.js")
    assert ArrayTable._esm == view_module("array_view.js")
    assert "function metricsChart" in JobView._esm and "function jtTryPanel" in ServeView._esm
