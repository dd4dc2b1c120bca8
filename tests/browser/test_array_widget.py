"""The ArrayView widget in a real JupyterLab in headless chromium, on a real 4-task sweep of the
local tier: a row per task with its parameters, one task failing shows FAILED (its error as text,
never HTML), a click on a task opens that task's own JobView (rank grid and log), and Cancel on a
running task (confirmed) cancels only it. Screenshot: test-output/array-widget.png."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import JOB_TIMEOUT_MS, OUTPUT, Lab
from .sweep_notebook import run_sweep_cell
from .test_job_widget import HOSTILE_IMG, confirm, no_page_errors

pytestmark = [pytest.mark.browser]


def test_sweep_widget_rows_failure_task_view_and_cancel(page: Any, local_lab: Lab) -> None:
    cell = run_sweep_cell(page, local_lab, "ui-sweep", "0.1,0.2,0.3,0.4", fails="0.3", sleeps="0.4",
                          options="--array %4")
    widget = cell.locator(".jt-array")
    expect(widget).to_be_visible()
    title = re.compile(r"^sweep \d+ · ui-sweep · at most 4 at once$")
    expect(widget.locator(".jt-title")).to_have_text(title)
    rows = widget.locator("tr.jt-task")
    expect(rows).to_have_count(4)
    params = [rows.nth(i).locator("td").nth(1) for i in range(4)]
    for i, lr in enumerate(["0.1", "0.2", "0.3", "0.4"]):
        expect(params[i]).to_have_text(f"lr={lr}")
    state = [rows.nth(i).locator("td.jt-task-state") for i in range(4)]
    expect(state[0]).to_have_text("COMPLETED", timeout=JOB_TIMEOUT_MS)
    expect(state[1]).to_have_text("COMPLETED", timeout=JOB_TIMEOUT_MS)
    expect(state[2]).to_have_text("FAILED", timeout=JOB_TIMEOUT_MS)
    expect(state[3]).to_have_text("RUNNING", timeout=JOB_TIMEOUT_MS)
    expect(rows.nth(0).locator("td").nth(4)).to_have_text("loss 0.2")
    exit_cell = rows.nth(2).locator("td").nth(5)
    expect(exit_cell).to_contain_text(f"ValueError: {HOSTILE_IMG}")  # shown as text ...
    assert widget.locator("img").count() == 0  # ... never as HTML

    # A click on the failed task opens its own job view: its rank grid and its log.
    rows.nth(2).click()
    expect(rows.nth(2)).to_have_class(re.compile(r"\bjt-selected-task\b"))
    task_view = cell.locator(".jt-job:not(.jt-array)")
    expect(task_view).to_have_count(1)
    expect(task_view.locator(".jt-title")).to_have_text(re.compile(r"^job \d+_2 · ui-sweep$"))
    expect(task_view.locator('.jt-grid .jt-rank[data-phase="f"]')).to_have_count(1)
    expect(task_view.locator(".jt-log .jt-line").filter(has_text="step=1 loss=0.600")).to_have_count(1)

    # Cancel the running task (asked twice), then every task has ended.
    cancel = rows.nth(3).locator("button.jt-task-cancel")
    cancel.click()
    expect(cancel).to_have_text("Cancel task 3?")
    confirm(cancel)
    expect(state[3]).to_have_text("CANCELLED", timeout=JOB_TIMEOUT_MS)
    expect(widget.locator(".jt-state")).to_have_text("FAILED", timeout=JOB_TIMEOUT_MS)
    expect(widget.locator(".jt-counts")).to_have_text("4 tasks: 2 COMPLETED, 1 FAILED, 1 CANCELLED")
    expect(widget.locator(".jt-summary")).to_have_text(re.compile(
        r"^array \d+ \(4 tasks\) 2 COMPLETED, 1 FAILED \(task 2: rank 0 \(local0\) exit 1 — ValueError: "
        + re.escape(HOSTILE_IMG) + r"\), 1 CANCELLED; best loss 0\.2 at lr=0\.1$"), timeout=JOB_TIMEOUT_MS)
    expect(widget.locator("button.jt-cancel")).to_be_disabled()
    OUTPUT.mkdir(exist_ok=True)
    cell.screenshot(path=str(OUTPUT / "array-widget.png"))
    no_page_errors(page)
