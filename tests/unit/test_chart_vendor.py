"""uPlot ships inside the package (jupyter_tiers/faces/widgets/vendor/, checked in, no CDN): the
copy is the version labextension/package.json pins, made by labextension/scripts/vendor-uplot.mjs
from node_modules (checked when node_modules is installed, as tests/run.sh does), with its MIT
licence beside it, and the wheel's package data takes it (the widgets' folder is the package's)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from tests.helpers import loud_skip
from tests.unit.widget_js import WIDGETS, node_or_skip

LABEXT = WIDGETS.parents[2] / "labextension"
VENDOR = WIDGETS / "vendor"


def test_the_copy_is_the_pinned_version_with_its_licence() -> None:
    pinned = json.loads((LABEXT / "package.json").read_text())["dependencies"]["uplot"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", pinned), "pin uplot exactly: the checked-in copy is one version"
    head = (VENDOR / "uplot.js").read_text(encoding="utf-8").splitlines()[0]
    assert head.startswith(f"// uPlot {pinned} "), head
    assert f"uPlot {pinned} " in (VENDOR / "uplot.css").read_text(encoding="utf-8")
    assert "MIT License" in (VENDOR / "LICENSE.uplot").read_text(encoding="utf-8")


def test_the_copy_is_what_the_script_makes_from_node_modules() -> None:
    node = node_or_skip("uPlot vendor check")
    if not (LABEXT / "node_modules" / "uplot" / "package.json").exists():
        loud_skip("uPlot vendor check", "labextension/node_modules is not installed (jlpm install)",
                  fail_in_ci=False)
    res = subprocess.run([node, "scripts/vendor-uplot.mjs", "--check"], cwd=LABEXT, capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr


def test_the_wheel_takes_the_vendor_folder() -> None:
    # hatch's wheel target takes the package folder whole; nothing in .gitignore may drop vendor/
    ignored = subprocess.run(["git", "check-ignore", "-q", str(VENDOR / "uplot.js")], cwd=WIDGETS,
                             capture_output=True)
    assert ignored.returncode == 1, "vendor/uplot.js is git-ignored: a clean clone would lack it"
    pyproject = (WIDGETS.parents[2] / "pyproject.toml").read_text()
    assert 'packages = ["jupyter_tiers"]' in pyproject
    assert Path(VENDOR / "uplot.js").stat().st_size > 40_000
