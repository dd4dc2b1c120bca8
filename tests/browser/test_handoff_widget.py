"""The handoff in the JobView widget, in a real JupyterLab in headless chromium, on a real Slurm
job: the header and the summary show the newest checkpoint (as text). Every wait is bounded by a
Playwright timeout; nothing asserts how fast anything was."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from jupyter_tiers.data.handoff import decode_detail
from jupyter_tiers.slurm.tier import SlurmTier

from .conftest import JOB_TIMEOUT_MS, Lab
from .test_job_widget import job_id_of, no_page_errors, open_notebook, run_cell, write_notebook

pytestmark = [pytest.mark.cluster, pytest.mark.browser]
SHARED_LAB = True  # one JupyterLab for this and the other widget modules (conftest.lab)


def test_job_widget_shows_the_checkpoint(page: Any, lab: Lab, box_tier: SlurmTier) -> None:
    name = write_notebook(
        lab,
        "handoff-ui.ipynb",
        "%load_ext jupyter_tiers",
        """
        %%slurm_train --profile box --name ui-ckpt
        import os, pathlib
        import time
        pathlib.Path(os.environ["JT_CHECKPOINT_DIR"], "ckpt-000100.pt").write_text("w")
        time.sleep(1.1)  # the newest is the one with markup in its name
        pathlib.Path(os.environ["JT_CHECKPOINT_DIR"], "ckpt-<b>7<i>.pt").write_text("w")
        """,
    )
    cells = open_notebook(page, lab, name)
    run_cell(page, cells, 0)
    widget = run_cell(page, cells, 1).locator(".jt-job")
    expect(widget).to_be_visible()
    job_id = job_id_of(widget)
    expect(widget.locator(".jt-state")).to_have_text("COMPLETED", timeout=JOB_TIMEOUT_MS)
    header = widget.locator(".jt-header .jt-checkpoint")
    expected = re.compile(r"^checkpoint /\S+/ui-ckpt/" + job_id + r"/checkpoints/ckpt-<b>7<i>\.pt$")
    expect(header).to_have_text(expected, timeout=JOB_TIMEOUT_MS)
    expect(header).to_be_visible()
    recorded = decode_detail(box_tier.registry.get(f"box/{job_id}").detail)[1]
    assert recorded and header.text_content() == f"checkpoint {recorded}"
    # (then what the job used, batch/efficiency.py, when its ranks were sampled)
    summary = re.compile(r" — checkpoint " + re.escape(recorded) + "( — CPU .*)?$")
    expect(widget.locator(".jt-summary")).to_have_text(summary)
    # cluster text is text: a file name with markup is not rendered as HTML
    assert widget.locator(".jt-header b, .jt-header i, .jt-summary b").count() == 0
    no_page_errors(page)
