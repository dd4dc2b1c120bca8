"""Issue 16 §5 in the Tiers sidebar's detail panel (a real JupyterLab, headless chromium, a real
Slurm job): the job view's Files tab lists what the job left through the REST API, and its
Download button has the browser save the file (an authenticated attachment, no token in the URL)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from jupyter_tiers.core.model import JobState
from jupyter_tiers.slurm.tier import SlurmTier

from .conftest import UI_TIMEOUT_MS, Lab
from .test_sidebar import no_page_errors, open_lab, row_of, submit, tiers_lab  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.cluster]


def test_detail_panel_files_tab(page: Any, tiers_lab: Lab, box_tier: SlurmTier) -> None:  # noqa: F811
    job = submit(box_tier, "side-files", """
        import pathlib
        pathlib.Path("metrics.csv").write_text("step,loss\\n1,0.25\\n")
        """, nodes=1)
    assert job.wait(timeout=300).state is JobState.COMPLETED, job.logs()
    side = open_lab(page, tiers_lab)
    row = row_of(side, job)
    expect(row).to_be_visible(timeout=UI_TIMEOUT_MS)
    row.click()
    view = page.locator(".jt-detail .jt-job")
    expect(view).to_be_visible()
    view.locator(".jt-files-toggle").click()
    file_row = view.locator(".jt-file").filter(has=page.locator(".jt-file-name", has_text="metrics.csv"))
    expect(file_row).to_have_count(1, timeout=UI_TIMEOUT_MS)
    expect(file_row.locator(".jt-file-size")).to_have_text("17 B")
    # Issue 29 §11: the job's own output first; jupyter-tiers' files (.jobid, rank.sh,
    # job.sbatch, ...) behind a toggle, listed after the job's.
    # Issue 41 item 11: the user's cell (main.py) is the user's, listed with the outputs.
    outputs = view.locator('.jt-file[data-group="output"] .jt-file-name')
    expect(outputs.filter(has_text="metrics.csv")).to_have_count(1)
    expect(outputs.filter(has_text="main.py")).to_have_count(1)
    expect(view.locator('.jt-file[data-group="tiers"]')).to_have_count(0)
    toggle = view.locator(".jt-files-own-toggle")
    expect(toggle).to_have_text(re.compile(r"^Show jupyter-tiers' own files \(\d+\)$"))
    toggle.click()
    for own in (".jobid", ".submit.lock", "rank.sh", "job.sbatch"):
        expect(view.locator('.jt-file[data-group="tiers"]').filter(
            has=page.locator(".jt-file-name", has_text=own))).to_have_count(1)
    groups = [g for g in view.locator(".jt-file").evaluate_all("rows => rows.map(r => r.dataset.group)")]
    assert groups.index("tiers") > groups.index("output") and groups[-1] == "tiers", groups
    assert "output" not in groups[groups.index("tiers"):], groups
    toggle.click()
    expect(view.locator('.jt-file[data-group="tiers"]')).to_have_count(0)
    with page.expect_download() as info:
        file_row.locator(".jt-download").click()
    download = info.value
    assert "token=" not in download.url
    assert download.suggested_filename == "metrics.csv"
    assert Path(download.path()).read_text() == "step,loss\n1,0.25\n"
    expect(file_row.locator(".jt-download-status")).to_have_text(
        "saved by the browser (its downloads folder)")
    no_page_errors(page)
