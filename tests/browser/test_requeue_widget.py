"""A requeued job in the live widget, in JupyterLab in Chromium: `scontrol requeue` mid-run on the
Slurm test cluster, and the same widget shows "restart 1" in its header, keeps run 0's lines,
draws the "— restart 1 —" marker line (styled from theme variables), then run 1's lines and
"COMPLETED after 1 restart". Screenshot: test-output/widget-requeue.png."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from jupyter_tiers.slurm.tier import SlurmTier

from .conftest import JOB_TIMEOUT_MS, OUTPUT, Lab
from .test_job_widget import job_id_of, no_page_errors, open_notebook, run_cell, write_notebook

pytestmark = [pytest.mark.cluster, pytest.mark.browser]
SHARED_LAB = True  # one JupyterLab for this and the other widget modules (conftest.lab)

# Slurm holds a requeued job cred_expire+1 s (its begin time) before the next run: 31 s on the test
# cluster (cluster.sh), 121 s on a default Slurm; the bound allows the default.
REQUEUE_TIMEOUT_MS = 360_000


def test_requeued_job_stays_in_its_widget(page: Any, lab: Lab, box_tier: SlurmTier) -> None:
    name = write_notebook(
        lab,
        "ui-requeue.ipynb",
        "%load_ext jupyter_tiers",
        """
        %%slurm_train --profile box --nodes 2 --requeue --name ui-requeue
        import os, time
        run = os.environ["JT_RESTART_COUNT"]
        print(f"run {run} begins", flush=True)
        if run == "0":
            time.sleep(600)
        print(f"run {run} done", flush=True)
        """,
    )
    cells = open_notebook(page, lab, name)
    run_cell(page, cells, 0)
    widget = run_cell(page, cells, 1).locator(".jt-job")
    job_id = job_id_of(widget)
    expect(widget.locator(".jt-line", has_text="run 0 begins")).to_have_count(2, timeout=JOB_TIMEOUT_MS)
    expect(widget.locator(".jt-restarts")).to_be_hidden()

    result = box_tier.transport.run(["scontrol", "requeue", job_id], check=False)
    assert result.exit_status == 0, result.stderr
    expect(widget.locator(".jt-restarts")).to_have_text("restart 1", timeout=JOB_TIMEOUT_MS)
    marker = widget.locator(".jt-line.jt-restart")
    expect(marker).to_have_count(1, timeout=REQUEUE_TIMEOUT_MS)
    expect(marker.locator(".jt-text")).to_have_text("— restart 1 —")
    expect(widget.locator(".jt-state")).to_have_text("COMPLETED", timeout=REQUEUE_TIMEOUT_MS)
    expect(widget.locator(".jt-summary")).to_contain_text(f"job {job_id} COMPLETED after 1 restart")
    expect(widget.locator(".jt-line", has_text="run 1 done")).to_have_count(2, timeout=JOB_TIMEOUT_MS)

    # One log in order: run 0's lines, the marker, run 1's lines.
    texts = widget.locator(".jt-log .jt-text").all_text_contents()
    at = texts.index("— restart 1 —")
    assert texts[:at].count("run 0 begins") == 2 and texts[at:].count("run 1 begins") == 2, texts
    # The marker stands out (a top rule and bold), from the theme's variables.
    style = marker.evaluate(
        "el => { const s = getComputedStyle(el); return [s.borderTopStyle, s.fontWeight]; }")
    assert style == ["solid", "600"], style
    # The badges of the states between runs (Slurm 22.05 shows PENDING there; others REQUEUED).
    for state in ("REQUEUED", "PREEMPTED"):
        edge = widget.locator(".jt-state").evaluate(
            "(el, st) => { const c = el.cloneNode(); c.dataset.state = st; el.after(c);"
            " const s = getComputedStyle(c).borderTopStyle; c.remove(); return s; }", state)
        assert edge == "dashed", (state, edge)
    OUTPUT.mkdir(exist_ok=True)
    widget.screenshot(path=str(OUTPUT / "widget-requeue.png"))
    no_page_errors(page)
