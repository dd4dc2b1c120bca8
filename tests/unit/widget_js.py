"""Runs a script against the widgets' ES modules (jupyter_tiers/faces/widgets/*.js) in node, as real
ES modules: the script and copies of the modules sit in a temporary package of type "module",
so the script imports them as the views do (``import { h } from "./view_common.js"``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests.helpers import loud_skip

WIDGETS = Path(__file__).resolve().parents[2] / "jupyter_tiers" / "faces" / "widgets"


def node_or_skip(what: str) -> str:
    """node's path, or a loud skip of ``what`` where it is not installed."""
    node = shutil.which("node")
    if node is None:
        loud_skip(what, "node is not installed", fail_in_ci=False)
    return node


def run_module(script: str, what: str) -> Any:
    """Runs ``script`` (an ES module that prints one JSON value) beside the widgets' modules;
    returns the value. ``what`` names the tests in a skip."""
    node = node_or_skip(what)
    with tempfile.TemporaryDirectory() as tmp:
        for path in WIDGETS.glob("*.js"):
            shutil.copy(path, tmp)
        shutil.copytree(WIDGETS / "vendor", Path(tmp, "vendor"))  # uPlot (uplot_chart.js imports it)
        Path(tmp, "package.json").write_text('{"type": "module"}\n', encoding="utf-8")
        Path(tmp, "_script.js").write_text(script, encoding="utf-8")
        res = subprocess.run([node, "_script.js"], cwd=tmp, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)
