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
    # The line went out for front ends without the widget too: here the widget's CSS hides it.
    plain = cell.locator(".jt-plain-summary")
    expect(plain).to_have_count(1)
    expect(plain).to_be_hidden()
    assert plain.text_content() == f"(live view: %tiers attach {job_id})\n{summary}"


def test_a_saved_notebook_keeps_the_jobs_end_not_its_submission(page: Any, lab: Lab,
                                                                 box_tier: SlurmTier) -> None:
    """Issue 41 item 1: without --wait the cell returns at once, and the text a saved notebook
    kept (what GitHub, nbviewer and a reopened notebook without its kernel show) was the widget's
    first repr, ``JobView(job 39 'ux-train2': PENDING)``, for a job that completed. The line under
    the widget is kept current by display updates from the watcher's thread, and saved."""
    import json

    name = write_notebook(lab, "ui-saved-end.ipynb", "%load_ext jupyter_tiers",
                          "%%slurm_train --profile box --name ui-saved\nprint('saved')")
    cells = open_notebook(page, lab, name)
    run_cell(page, cells, 0)
    cell = run_cell(page, cells, 1)
    widget = cell.locator(".jt-job")
    job_id = job_id_of(widget)
    expect(widget.locator(".jt-summary")).to_contain_text(f"job {job_id} COMPLETED in ",
                                                          timeout=JOB_TIMEOUT_MS)
    summary = widget.locator(".jt-summary").inner_text().strip()
    plain = cell.locator(".jt-plain-summary")
    expect(plain).to_have_count(1)
    expect(plain).to_be_hidden()  # the widget shows it: hidden by its CSS
    expect(plain).to_have_text(f"(live view: %tiers attach {job_id})\n{summary}", use_inner_text=False)
    page.keyboard.press("Control+s")
    saved_texts: list[str] = []

    def saved() -> list[str]:
        nb = json.loads((lab.root / name).read_text(encoding="utf-8"))
        outputs = nb["cells"][1]["outputs"]
        return ["".join(o.get("data", {}).get("text/plain", "")) for o in outputs
                if o["output_type"] == "display_data"]

    for _ in range(60):  # the save is asynchronous: read the file until it holds the run
        saved_texts = saved()
        if any(summary in text for text in saved_texts):
            break
        page.wait_for_timeout(500)
    assert any(text == f"(live view: %tiers attach {job_id})\n{summary}" for text in saved_texts), saved_texts
    assert not any("PENDING" in text or "RUNNING" in text for text in saved_texts), saved_texts
