"""The small local-tier sweep the array browser tests (test_array_widget.py, test_sidebar_array.py)
run from a notebook: every task prints one metric line, one task fails with hostile markup in its
error and one keeps running."""

from __future__ import annotations

from typing import Any

from .conftest import Lab
from .test_job_widget import HOSTILE_IMG, open_notebook, run_cell, write_notebook


def run_sweep_cell(page: Any, lab: Lab, name: str, lrs: str, *, fails: str, sleeps: str,
                   options: str = "") -> Any:
    """Write ``{name}.ipynb`` (``%load_ext jupyter_tiers``, then a ``%%slurm_train --profile local
    --name {name} --sweep "lr={lrs}" {options}`` cell), open it and run both cells; return the
    sweep's cell. Each task prints ``step=1 loss={2 * lr}``; the task of lr ``fails`` raises a
    ValueError whose text is HOSTILE_IMG and the task of lr ``sleeps`` sleeps 300 s."""
    magic = f'%%slurm_train --profile local --name {name} --sweep "lr={lrs}" {options}'.rstrip()
    notebook = write_notebook(
        lab,
        f"{name}.ipynb",
        "%load_ext jupyter_tiers",
        f"""
        {magic}
        import time
        print(f"step=1 loss={{params['lr'] * 2:.3f}}", flush=True)
        if params["lr"] == {fails}:
            raise ValueError({HOSTILE_IMG!r})
        if params["lr"] == {sleeps}:
            time.sleep(300)
        """,
    )
    cells = open_notebook(page, lab, notebook)
    run_cell(page, cells, 0)
    return run_cell(page, cells, 1)
