"""The seed article's shape in the browser: 256 ranks stay readable and the failure stands out.

Runs on the embedded local tier (32 emulated nodes x 8 ranks of bash), so the grid is filled by a
real job without reshaping the Slurm test cluster.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import JOB_TIMEOUT_MS, OUTPUT, Lab
from .test_job_widget import no_page_errors, open_notebook, run_cell, write_notebook

pytestmark = [pytest.mark.cluster, pytest.mark.browser]


def test_256_rank_grid_is_readable_and_marks_the_first_failure(page: Any, lab: Lab) -> None:
    name = write_notebook(
        lab,
        "ui-256.ipynb",
        "%load_ext jupyter_tiers",
        """
        %%slurm_train --profile local --shell --nodes 32 --ntasks-per-node 8 --name seed-256
        if [ "$RANK" = 137 ]; then sleep 3; echo "rank 137: NCCL timeout (simulated)" >&2; exit 7; fi
        sleep 300
        """,
    )
    cells = open_notebook(page, lab, name)
    run_cell(page, cells, 0)
    cell = run_cell(page, cells, 1)
    widget = cell.locator(".jt-job")
    grid_cells = widget.locator(".jt-rank")
    expect(grid_cells).to_have_count(256, timeout=JOB_TIMEOUT_MS)
    expect(widget.locator(".jt-state")).to_have_text("FAILED", timeout=JOB_TIMEOUT_MS)
    failed = widget.locator('.jt-rank[data-phase="f"]')
    expect(failed).to_have_count(1)
    expect(failed).to_have_attribute("data-rank", "137")
    expect(failed).to_have_class(re.compile(r"\bjt-first-failure\b"))
    expect(widget.locator('.jt-rank[data-phase="s"]')).to_have_count(255)
    expect(widget.locator(".jt-summary")).to_contain_text(
        re.compile(r"first failure: rank 137 \(local17\) exit 7; 255 ranks stopped")
    )
    # Readable: every cell is a visible square of at least 8 px, and the grid fits the output.
    box = failed.bounding_box()
    assert box is not None and box["width"] >= 8 and box["height"] >= 8
    grid_box = widget.locator(".jt-grid").bounding_box()
    cell_box = cell.bounding_box()
    assert grid_box is not None and cell_box is not None and grid_box["width"] <= cell_box["width"]
    failed.hover()
    expect(widget.locator(".jt-tip")).to_contain_text("rank 137 · local17 · failed (exit 7)")
    OUTPUT.mkdir(exist_ok=True)
    cell.screenshot(path=str(OUTPUT / "widget-256.png"))
    no_page_errors(page)
