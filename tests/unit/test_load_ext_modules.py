"""``%load_ext jupyter_tiers`` loads the option table and the magics, not the engine (issue 29).

The tier API, the views, the registry, the guard and the handoff load when a cell first needs them;
a kernel that only loads the extension pays for a dozen small modules (bench/load_ext.py times it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

LOAD_EXT = (
    "import json, sys\n"
    "from IPython.core.interactiveshell import InteractiveShell\n"
    "InteractiveShell.instance().run_line_magic('load_ext', 'jupyter_tiers')\n"
    "print(json.dumps(sorted(m for m in sys.modules if m.startswith('jupyter_tiers'))))\n"
)

#: Modules of the engine and its views that %load_ext must not import.
ENGINE = ("jupyter_tiers.api", "jupyter_tiers.engine.tier", "jupyter_tiers.engine.handles",
          "jupyter_tiers.engine.watch",
          "jupyter_tiers.config.registry", "jupyter_tiers.app.actions", "jupyter_tiers.faces.tiers_command",
          "jupyter_tiers.faces.display", "jupyter_tiers.config.profiles", "jupyter_tiers.transport",
          "jupyter_tiers.slurm", "jupyter_tiers.k8s", "jupyter_tiers.local", "jupyter_tiers.faces.widgets")
#: At most this many of the package's modules load with the extension (12 when this was written),
#: not counting the folders' own docstring-only ``__init__`` modules.
MAX_MODULES = 16
#: The folders whose ``__init__`` is a docstring: loading one costs a file stat, not code.
FOLDERS = {"jupyter_tiers.core", "jupyter_tiers.batch", "jupyter_tiers.serving", "jupyter_tiers.data",
           "jupyter_tiers.spec", "jupyter_tiers.config", "jupyter_tiers.engine", "jupyter_tiers.app",
           "jupyter_tiers.faces", "jupyter_tiers.tools"}


def loaded_by_load_ext() -> list[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", LOAD_EXT], env=env, capture_output=True, text=True,
                         check=True, cwd=ROOT)
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def test_load_ext_loads_a_few_modules_and_no_engine() -> None:
    loaded = loaded_by_load_ext()
    assert "jupyter_tiers.faces.magics" in loaded
    engine = [m for m in loaded if m.startswith(ENGINE)]
    assert engine == [], f"%load_ext imported the engine: {engine}"
    modules = [m for m in loaded if m not in FOLDERS]
    assert len(modules) <= MAX_MODULES, f"%load_ext loaded {len(modules)} modules: {modules}"
