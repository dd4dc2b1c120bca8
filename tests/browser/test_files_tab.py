"""Issue 16 §5 in a real JupyterLab (headless chromium) on a real Slurm job: the JobView's
Files tab lists what the job left (a hostile file name shown as text), and its Download button
saves a file into the notebook's directory."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import JOB_TIMEOUT_MS, UI_TIMEOUT_MS, Lab
from .test_job_widget import HOSTILE_IMG, no_page_errors, open_notebook, run_cell, write_notebook

pytestmark = [pytest.mark.cluster, pytest.mark.browser]


def test_files_tab_lists_and_downloads(page: Any, lab: Lab) -> None:
    name = write_notebook(
        lab,
        "ui-files.ipynb",
        "%load_ext jupyter_tiers",
        f"""
        %%slurm_train --profile box --nodes 1 --name ui-files
        import pathlib
        pathlib.Path("metrics.csv").write_text("step,loss\\n1,0.25\\n")
        pathlib.Path({(HOSTILE_IMG + ".txt")!r}).write_text("x")
        print("wrote", flush=True)
        """,
    )
    (lab.root / "metrics.csv").unlink(missing_ok=True)
    cells = open_notebook(page, lab, name)
    run_cell(page, cells, 0)
    widget = run_cell(page, cells, 1).locator(".jt-job")
    expect(widget.locator(".jt-state")).to_have_text("COMPLETED", timeout=JOB_TIMEOUT_MS)
    widget.locator(".jt-files-toggle").click()
    rows = widget.locator(".jt-file")
    expect(rows.filter(has_text="metrics.csv")).to_have_count(1, timeout=UI_TIMEOUT_MS)
    row = rows.filter(has=widget.page.locator(".jt-file-name", has_text="metrics.csv"))
    expect(row.locator(".jt-file-size")).to_have_text("17 B")
    expect(widget.locator(".jt-file-name").filter(has_text=HOSTILE_IMG + ".txt")).to_have_count(1)
    expect(widget.locator("img")).to_have_count(0)
    row.locator(".jt-download").click()
    expect(row.locator(".jt-download-status")).to_have_text("saved to metrics.csv", timeout=UI_TIMEOUT_MS)
    assert (lab.root / "metrics.csv").read_text() == "step,loss\n1,0.25\n"
    no_page_errors(page)
