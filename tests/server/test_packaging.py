"""The extension is enabled by a data file the wheel installs, and the installed package (the
editable install tests/bootstrap.sh makes) shows up in ``jupyter server extension list``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import jupyter_tiers

ROOT = Path(__file__).resolve().parents[2]
CONFIG = "jupyter-config/jupyter_server_config.d/jupyter_tiers.json"


def test_the_config_file_enables_the_extension_and_the_wheel_installs_it() -> None:
    data = json.loads((ROOT / CONFIG).read_text())
    assert data == {"ServerApp": {"jpserver_extensions": {"jupyter_tiers": True}}}
    tomllib = pytest.importorskip("tomllib", reason="tomllib comes with Python 3.11+")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    shared = project["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-data"]
    assert shared[CONFIG] == "etc/jupyter/jupyter_server_config.d/jupyter_tiers.json"
    assert jupyter_tiers._jupyter_server_extension_points() == [{"module": "jupyter_tiers.faces.server"}]


@pytest.mark.local_procs
def test_jupyter_server_extension_list_shows_it_enabled_and_ok() -> None:
    jupyter = Path(sys.executable).parent / "jupyter"
    out = subprocess.run([str(jupyter), "server", "extension", "list"], capture_output=True, text=True,
                         timeout=120)
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
    assert re.search(r"^\s*jupyter_tiers enabled\s*$", text, re.M), text
    assert re.search(rf"^\s*jupyter_tiers {re.escape(jupyter_tiers.__version__)} OK\s*$", text, re.M), text
