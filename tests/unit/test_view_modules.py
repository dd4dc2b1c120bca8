"""The views' ES modules (jupyter_tiers/faces/widgets/*.js): each imports what it uses (no globals, no
order to keep), every module is some view's, and anywidget gets each view linked into one
module (esm_link.py) that node can load."""

from __future__ import annotations

import subprocess
from pathlib import Path

from jupyter_tiers.faces.widgets.array_view import ArrayTable
from jupyter_tiers.faces.widgets.esm_link import parse
from jupyter_tiers.faces.widgets.job_view import JobView
from jupyter_tiers.faces.widgets.serve_view import ServeView
from jupyter_tiers.faces.widgets.view_common import view_module
from tests.unit.widget_js import WIDGETS, node_or_skip, run_module

VIEWS = ("job_view.js", "serve_view.js", "array_view.js")


def imports_of(name: str) -> set[str]:
    """Every module ``name`` imports, directly or not."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        module = parse(todo[-1], (WIDGETS / todo.pop()).read_text(encoding="utf-8"))
        for target, _ in module.imports:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_every_module_belongs_to_a_view_and_the_views_share_view_common() -> None:
    used = set(VIEWS).union(*(imports_of(v) for v in VIEWS))
    assert used == {p.name for p in WIDGETS.glob("*.js")} | {"vendor/uplot.js"}
    assert all("view_common.js" in imports_of(v) for v in VIEWS)
    charts = {"uplot_chart.js", "chart_data.js", "vendor/uplot.js"}  # the metric and load charts
    assert imports_of("job_view.js") == {"view_common.js", "rank_grid.js", "metrics_chart.js",
                                         "files_pane.js"} | charts
    assert imports_of("serve_view.js") == {"view_common.js", "try_panel.js", "chat_markdown.js",
                                           "load_panel.js"} | charts


def test_the_widgets_load_their_linked_views() -> None:
    assert JobView._esm == view_module("job_view.js")
    assert ServeView._esm == view_module("serve_view.js")
    assert ArrayTable._esm == view_module("array_view.js")
    assert "function metricsChart" in JobView._esm and "function jtTryPanel" in ServeView._esm


def test_node_loads_every_linked_view_and_every_module(tmp_path: Path) -> None:
    node = node_or_skip("view module tests")
    (tmp_path / "package.json").write_text('{"type": "module"}\n')
    script = []
    for k, name in enumerate(VIEWS):
        (tmp_path / name).write_text(view_module(name), encoding="utf-8")
        script.append(f'import view{k} from "./{name}";')
    renders = ", ".join(f"typeof view{k}.render" for k in range(len(VIEWS)))
    script.append(f"console.log(JSON.stringify([{renders}]));")
    (tmp_path / "main.js").write_text("\n".join(script))
    res = subprocess.run([node, "main.js"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == '["function","function","function"]'
    # The modules themselves, as the lab panel's bundler reads them: each loads, with its exports.
    names = sorted(p.name for p in WIDGETS.glob("*.js"))
    loaded = run_module("\n".join(f'import * as m{k} from "./{n}";' for k, n in enumerate(names))
                        + "\nconsole.log(JSON.stringify([" + ", ".join(f"Object.keys(m{k}).sort()"
                                                                        for k in range(len(names))) + "]));",
                        "view module tests")
    exports = dict(zip(names, loaded, strict=True))
    assert exports["job_view.js"] == ["default", "jobView"]
    assert exports["serve_view.js"] == ["default", "jtEventsSection", "serveView"]
    assert exports["array_view.js"] == ["default", "render"]
    assert "jtFilesPane" in exports["files_pane.js"] and "h" in exports["view_common.js"]


def test_a_rendered_view_says_seen_every_minute_until_it_is_removed() -> None:
    """view_common.js's jtSeen: the kernel's SeenGate pauses a view no page has shown for a while
    (the browser closed), so every rendered view says so on a timer, stopped with the view."""
    got = run_module(
        'import { jtSeen, SEEN_MS } from "./view_common.js";\n'
        "let tick = null, every = null, cleared = null;\n"
        "globalThis.setInterval = (f, ms) => { tick = f; every = ms; return 7; };\n"
        "globalThis.clearInterval = (id) => { cleared = id; };\n"
        "const sent = [];\n"
        "const stop = jtSeen({ send: (m) => sent.push(m) });\n"
        "tick(); tick();\n"
        "stop();\n"
        "console.log(JSON.stringify([every, sent, cleared, SEEN_MS]));\n",
        "view module tests")
    assert got == [60000, [{"kind": "seen"}, {"kind": "seen"}], 7, 60000]
    for view in ("job_view.js", "serve_view.js"):
        text = (WIDGETS / view).read_text(encoding="utf-8")
        assert "jtSeen(model)" in text and "unseen()" in text, view
