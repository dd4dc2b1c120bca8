"""Live metric charts in JobView, in a real JupyterLab in headless chromium, on a real Slurm job:
rank 0's ``key=value`` prints become uPlot charts (labelled axes with tick values, a legend
with the current value, a hover read-out, nothing clipped), rank 1's numbers are not mixed in,
the step is the x axis, and the summary carries the main metric's last
value; picking rank 1 in the log's rank filter charts rank 1's series. Screenshots are left in
test-output/widget-metrics.png and widget-metrics-rank1.png."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from jupyter_tiers.core.model import JobState
from jupyter_tiers.slurm.tier import SlurmTier

from .chart_checks import check_chart
from .conftest import JOB_TIMEOUT_MS, OUTPUT, Lab
from .test_job_widget import job_id_of, no_page_errors, open_notebook, run_cell, write_notebook

pytestmark = [pytest.mark.cluster, pytest.mark.browser]
SHARED_LAB = True  # one JupyterLab for this and the other widget modules (conftest.lab)


def test_metrics_become_live_charts(page: Any, lab: Lab, box_tier: SlurmTier) -> None:
    name = write_notebook(
        lab,
        "ui-metrics.ipynb",
        "%load_ext jupyter_tiers",
        """
        %%slurm_train --profile box --nodes 2 --name ui-metrics --metrics "ppl=perplexity (\\S+)"
        import os, time
        rank = int(os.environ["RANK"])
        for step in range(1, 21):
            loss = 1.0 / step + 10 * rank  # rank 1's numbers would show as a jump
            print(f"step={step} loss={loss:.4f} lr=3e-4 grad_norm={0.5 + step / 100:.2f}", flush=True)
            print(f"perplexity {2.0 ** (1.0 / step):.4f}", flush=True)
            time.sleep(0.2)
        """,
    )
    cells = open_notebook(page, lab, name)
    run_cell(page, cells, 0)
    cell = run_cell(page, cells, 1)
    widget = cell.locator(".jt-job")
    job_id = job_id_of(widget)
    expect(widget.locator(".jt-state")).to_have_text("COMPLETED", timeout=JOB_TIMEOUT_MS)

    charts = widget.locator(".jt-metrics .jt-chart")
    loss = widget.locator('.jt-chart[data-metric="loss"]')
    check_chart(loss, ["step", ""], {"loss": "0.05"})
    expect(loss).to_have_attribute("data-points", "20")
    assert max(float(v) for v in (loss.get_attribute("data-ticks1") or "").split()) <= 1.2  # rank 0's only
    check_chart(widget.locator('.jt-chart[data-metric="lr"]'), ["step", ""], {"lr": "0.0003"}, hover=False)
    check_chart(widget.locator('.jt-chart[data-metric="ppl"]'), ["step", ""], {"ppl": "1.035"}, hover=False)
    assert widget.locator('.jt-chart[data-metric="step"]').count() == 0  # the x axis, not a chart
    names = [c.get_attribute("data-metric") for c in charts.all()]
    assert names[:4] == ["loss", "lr", "grad_norm", "ppl"], names
    expect(widget.locator(".jt-summary")).to_contain_text(f"job {job_id} COMPLETED")
    expect(widget.locator(".jt-summary")).to_contain_text(" — ppl 1.035")  # the custom metric is the main one
    OUTPUT.mkdir(exist_ok=True)
    cell.screenshot(path=str(OUTPUT / "widget-metrics.png"))
    assert box_tier.attach(job_id).status().state is JobState.COMPLETED

    # The charts follow the log's rank filter: rank 1's series, read by the kernel from the log.
    heading = widget.locator(".jt-metrics .jt-chart-heading")
    expect(heading).to_have_text("metrics of rank 0")
    widget.locator(".jt-rank-filter").select_option("1")
    expect(heading).to_have_attribute("data-rank", "1")
    expect(heading).to_have_text("metrics of rank 1 · the log's rank filter picks the rank")
    check_chart(loss, ["step", ""], {"loss": "10.05"})
    assert min(float(v) for v in (loss.get_attribute("data-ticks1") or "").split()) >= 9  # rank 1's only
    expect(loss).to_have_attribute("data-points", "20")
    check_chart(widget.locator('.jt-chart[data-metric="ppl"]'), ["step", ""], {"ppl": "1.035"}, hover=False)
    cell.screenshot(path=str(OUTPUT / "widget-metrics-rank1.png"))
    # The summary stays rank 0's; all ranks again charts rank 0.
    expect(widget.locator(".jt-summary")).to_contain_text(" — ppl 1.035")
    widget.locator(".jt-rank-filter").select_option("-1")
    expect(heading).to_have_attribute("data-rank", "0")
    expect(loss.locator('.jt-uchart-item[data-series="loss"] .jt-uchart-value')).to_have_text("0.05")
    no_page_errors(page)
