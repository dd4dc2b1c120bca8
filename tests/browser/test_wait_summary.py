"""Issue 21 section 4: with ``--wait`` in JupyterLab the summary line shows once, in the widget,
not a second time as plain text under it (that plain line is only for text-only front ends)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from jupyter_tiers.slurm.tier import SlurmTier

from .conftest import JOB_TIMEOUT_MS, Lab
from .test_job_widget import job_id_of, open_notebook, run_cell, write_notebook

pytestmark = [pytest.mark.cluster, pytest.mark.browser]


def test_the_wait_summary_shows_once(page: Any, lab: Lab, box_tier: SlurmTier) -> None:
    name = write_notebook(lab, "ui-wait-summary.ipynb", "%load_ext jupyter_tiers",
                          "%%slurm_train --profile box --wait --name ui-wait\nprint('waited')")
    cells = open_notebook(page, lab, name)
    run_cell(page, cells, 0)
    cell = run_cell(page, cells, 1)  # returns once the cell has finished (its execution count)
    widget = cell.locator(".jt-job")
    job_id = job_id_of(widget)
    expect(widget.locator(".jt-summary")).to_contain_text(f"job {job_id} COMPLETED in ",
                                                          timeout=JOB_TIMEOUT_MS)
    summary = widget.locator(".jt-summary").inner_text().strip()
    outputs = cell.locator(".jp-OutputArea").inner_text()
    assert outputs.count(f"job {job_id} COMPLETED in ") == 1, outputs
    assert summary in outputs
    # The line went out for text-only front ends too: JupyterLab rendered its empty HTML half.
    plain = cell.locator('.jp-OutputArea-output[data-mime-type="text/html"]')
    expect(plain).to_have_count(1)
    assert plain.inner_text() == ""
