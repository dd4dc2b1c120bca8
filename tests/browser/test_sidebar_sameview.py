"""Issue 29 item 6 in a real JupyterLab: one real Slurm job that fails (rank 3 raises a ValueError,
fail-stop stops the others) is shown by the notebook's JobView widget and by the Tiers sidebar's
detail panel, and what each shows is compared: title, state, summary (with the ValueError's
text), rank cells, fold line, error lines, the log's lines, the loss chart, and the log pane at
its end. History's EXIT for the job names the rank the widget names (``rank 3 exit 1``), not the
batch step's signal. Every wait is bounded; nothing asserts how fast anything was."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from jupyter_tiers.slurm.tier import SlurmTier
from tests.cluster.test_history import _wait_accounted

from .conftest import JOB_TIMEOUT_MS, OUTPUT, UI_TIMEOUT_MS, Lab
from .test_job_widget import job_id_of, open_notebook, run_cell, write_notebook
from .test_sidebar import SIDEBAR_ID, no_page_errors, tiers_lab  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.cluster, pytest.mark.browser]
SHARED_LAB = True

BODY = """
%%slurm_train --profile box --nodes 2 --ntasks-per-node 2 --name sameview
import os, time
rank = int(os.environ["RANK"])
for step in range(1, 61):
    print(f"step {step} loss={2.0 / step:.4f}", flush=True)
up = os.path.join(os.environ["JT_JOB_DIR"], "up")
os.makedirs(up, exist_ok=True)
open(os.path.join(up, str(rank)), "w").close()
if rank == 3:  # fail once every rank is up, so fail-stop has 3 started ranks to stop
    for _ in range(1200):
        if len(os.listdir(up)) == 4:
            break
        time.sleep(0.1)
    raise ValueError("bad batch at step 61")
time.sleep(300)
"""

#: What a person reads in a job view, as text (the same function on both views).
SHOWN = """el => {
  const text = (sel) => { const n = el.querySelector(sel); return n ? n.textContent : null; };
  const all = (sel) => [...el.querySelectorAll(sel)].map((n) => n.textContent);
  const log = el.querySelector('.jt-log');
  const charts = el.querySelector('.jt-metrics');
  return {
    title: text('.jt-title'), state: text('.jt-state'), summary: text('.jt-summary'),
    tip: text('.jt-tip'), legend: text('.jt-legend'),
    ranks: [...el.querySelectorAll('.jt-rank')].map((n) => `${n.dataset.phase} ${n.title}`),
    fold: text('.jt-log .jt-fold .jt-text'),
    errors: all('.jt-log .jt-line.jt-error'),
    lines: all('.jt-log .jt-line'),
    charted: charts !== null && charts.textContent.includes('loss'),
    metrics: charts ? [...charts.querySelectorAll('[data-metric]')].map((n) => n.dataset.metric) : [],
  };
}"""

#: The log pane scrolls and shows its end (following, as it does from the start).
AT_END = ("el => el.scrollHeight > el.clientHeight + 20"
          " && el.scrollHeight - el.scrollTop - el.clientHeight < 4")


def test_the_sidebar_detail_shows_what_the_notebook_widget_shows(
    page: Any, tiers_lab: Lab, box_tier: SlurmTier  # noqa: F811
) -> None:
    name = write_notebook(tiers_lab, "ui-sameview.ipynb", "%load_ext jupyter_tiers", BODY)
    cells = open_notebook(page, tiers_lab, name)
    run_cell(page, cells, 0)
    cell = run_cell(page, cells, 1)
    widget = cell.locator(".jt-job")
    job_id = job_id_of(widget)
    expect(widget.locator(".jt-state")).to_have_text("FAILED", timeout=JOB_TIMEOUT_MS)
    summary = widget.locator(".jt-summary")
    expect(summary).to_contain_text("ValueError: bad batch at step 61", timeout=JOB_TIMEOUT_MS)
    expect(widget.locator(".jt-log .jt-fold")).to_have_count(1, timeout=UI_TIMEOUT_MS)
    page.wait_for_function(f"el => ({AT_END})(el)", arg=widget.locator(".jt-log").element_handle(),
                           timeout=UI_TIMEOUT_MS)
    notebook = widget.evaluate(SHOWN)
    assert notebook["charted"], notebook
    text = notebook["summary"]
    match = re.search(r"first failure: rank (\d+) \(\S+\) exit (\d+)", text)
    assert match and match.group(1) == "3", text
    OUTPUT.mkdir(exist_ok=True)
    cell.screenshot(path=str(OUTPUT / "sameview-notebook.png"))

    # The same job in the sidebar's detail panel.
    page.locator(f'.jp-SideBar [data-id="{SIDEBAR_ID}"]').click()
    side = page.locator(f"#{SIDEBAR_ID}")
    expect(side).to_be_visible()
    row = side.locator(f'.jt-side-row[data-key="box/{job_id}"]')
    expect(row.locator(".jt-side-badge")).to_have_text("FAILED", timeout=JOB_TIMEOUT_MS)
    row.click()
    detail = page.locator(".jt-detail").filter(has=page.locator(".jt-job")).filter(visible=True)
    view = detail.locator(".jt-job")
    expect(view.locator(".jt-title")).to_have_text(notebook["title"], timeout=UI_TIMEOUT_MS)
    expect(view.locator(".jt-summary")).to_have_text(text, timeout=JOB_TIMEOUT_MS)
    expect(view.locator(".jt-log .jt-fold")).to_have_count(1, timeout=UI_TIMEOUT_MS)
    expect(view.locator(".jt-log .jt-line")).to_have_count(len(notebook["lines"]), timeout=UI_TIMEOUT_MS)
    page.wait_for_function(f"el => ({AT_END})(el)", arg=view.locator(".jt-log").element_handle(),
                           timeout=UI_TIMEOUT_MS)
    lab_panel = view.evaluate(SHOWN)
    for key, value in notebook.items():
        assert lab_panel[key] == value, (key, lab_panel[key], value)
    detail.screenshot(path=str(OUTPUT / "sameview-sidebar.png"))

    # History names the failure as the widget does, not the batch step's exit (15 after fail-stop).
    _wait_accounted(box_tier, job_id)
    side.locator('.jt-side-tab[data-tab="history"]').click()
    hist = side.locator(".jt-hist")
    expect(hist).to_be_visible()
    hist.locator(".jt-hist-days").select_option("1")
    mine = hist.locator(f'.jt-hist-row[data-job="{job_id}"]')
    expect(mine).to_be_visible(timeout=JOB_TIMEOUT_MS)
    expect(mine.locator(".jt-hist-exit")).to_have_text(f"rank {match.group(1)} exit {match.group(2)}")
    no_page_errors(page)
