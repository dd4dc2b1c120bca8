"""`import jupyter_tiers` stays fast: heavy dependencies load only when used."""

from __future__ import annotations

import subprocess
import sys


def test_import_does_not_load_heavy_dependencies() -> None:
    code = (
        "import sys, jupyter_tiers, jupyter_tiers.faces.magics, jupyter_tiers.slurm.tier;"
        "heavy = [m for m in ('paramiko', 'kubernetes', 'ipywidgets', 'anywidget', 'torch')"
        " if m in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_package_is_typed() -> None:
    from importlib.resources import files

    assert files("jupyter_tiers").joinpath("py.typed").is_file()
