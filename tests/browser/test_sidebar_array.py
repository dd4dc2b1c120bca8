"""An array in the "Tiers" sidebar (labextension/) in a real JupyterLab in headless chromium: a
small sweep submitted from a notebook on the local tier is one sidebar row; its detail panel runs
the notebook ArrayView's own task table (a row per task with its parameters and state), its row
Cancel (confirmed) cancels that task through the server (`POST jobs/local/{ID_i}/cancel`), and a
click on a task opens that task's own job panel (rank grid and log). Screenshot:
test-output/sidebar-array.png."""

from __future__ import annotations

import contextlib
import re
import urllib.error
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import JOB_TIMEOUT_MS, OUTPUT, Lab
from .sweep_notebook import run_sweep_cell
from .test_job_widget import HOSTILE_IMG, confirm, no_page_errors

pytestmark = [pytest.mark.browser]

SIDEBAR_ID = "jupyter-tiers-sidebar"


def test_sweep_in_the_sidebar_task_table_cancel_one_and_open_a_task(page: Any, local_lab: Lab) -> None:
    cell = run_sweep_cell(page, local_lab, "side-sweep", "0.1,0.2,0.3", fails="0.2", sleeps="0.3")
    title = cell.locator(".jt-array .jt-title")
    expect(title).to_have_text(re.compile(r"^sweep \d+ · side-sweep$"))
    array_id = (title.text_content() or "").split()[1]
    try:
        page.locator(f'.jp-SideBar [data-id="{SIDEBAR_ID}"]').click()
        side = page.locator(f"#{SIDEBAR_ID}")
        row = side.locator(f'.jt-side-row[data-key="local/{array_id}"]')
        expect(row).to_have_count(1, timeout=JOB_TIMEOUT_MS)  # the array is one row, not three
        expect(row.locator(".jt-side-badge")).to_have_text("RUNNING", timeout=JOB_TIMEOUT_MS)
        row.click()

        # The detail panel: the notebook's task table, a row per task.
        panel = page.locator(".jt-detail").filter(has=page.locator(".jt-array"))
        table = panel.locator(".jt-array")
        expect(table.locator(".jt-title")).to_have_text(f"sweep {array_id} · side-sweep")
        rows = table.locator("tr.jt-task")
        expect(rows).to_have_count(3)
        for i, lr in enumerate(["0.1", "0.2", "0.3"]):
            expect(rows.nth(i).locator("td").nth(0)).to_have_text(str(i))
            expect(rows.nth(i).locator("td").nth(1)).to_have_text(f"lr={lr}")
        state = [rows.nth(i).locator("td.jt-task-state") for i in range(3)]
        expect(state[0]).to_have_text("COMPLETED", timeout=JOB_TIMEOUT_MS)
        expect(state[1]).to_have_text("FAILED", timeout=JOB_TIMEOUT_MS)
        expect(state[2]).to_have_text("RUNNING", timeout=JOB_TIMEOUT_MS)
        expect(rows.nth(0).locator("td").nth(4)).to_have_text("loss 0.2")
        expect(rows.nth(1).locator("td").nth(5)).to_contain_text(f"ValueError: {HOSTILE_IMG}")
        assert panel.locator("img").count() == 0  # cluster text as text, never HTML
        expect(table.locator(".jt-counts")).to_have_text("3 tasks: 1 RUNNING, 1 COMPLETED, 1 FAILED")

        # Cancel on the running task asks once more, then goes to the server as the task's cancel.
        cancel = rows.nth(2).locator("button.jt-task-cancel")
        cancel.click()
        expect(cancel).to_have_text("Cancel task 2?")
        task_cancel = f"/jupyter-tiers/api/jobs/local/{array_id}_2/cancel"
        with page.expect_request(lambda r: r.method == "POST" and r.url.split("?")[0].endswith(task_cancel)):
            confirm(cancel)
        expect(state[2]).to_have_text("CANCELLED", timeout=JOB_TIMEOUT_MS)
        expect(table.locator(".jt-state")).to_have_text("FAILED", timeout=JOB_TIMEOUT_MS)
        expect(table.locator(".jt-summary")).to_have_text(re.compile(
            rf"^array {array_id} \(3 tasks\) 1 COMPLETED, 1 FAILED \(task 1: rank 0 \(local0\) exit 1 — "
            r"ValueError: .*\), 1 CANCELLED; best loss 0\.2 at lr=0\.1$"), timeout=JOB_TIMEOUT_MS)
        expect(table.locator("button.jt-cancel")).to_be_disabled()
        expect(row.locator(".jt-side-badge")).to_have_text("FAILED", timeout=JOB_TIMEOUT_MS)
        OUTPUT.mkdir(exist_ok=True)
        page.screenshot(path=str(OUTPUT / "sidebar-array.png"))

        # A click on a task opens that task's own job panel: its rank grid and its log.
        task_details = f"/jupyter-tiers/api/jobs/local/{array_id}_1"
        with page.expect_request(lambda r: r.url.split("?")[0].endswith(task_details)):
            rows.nth(1).click()
        expect(rows.nth(1)).to_have_class(re.compile(r"\bjt-selected-task\b"))
        task = page.locator(".jt-detail .jt-job:not(.jt-array)")
        expect(task).to_have_count(1)
        expect(task.locator(".jt-title")).to_have_text(f"job {array_id}_1 · side-sweep")
        expect(task.locator(".jt-state")).to_have_text("FAILED")
        expect(task.locator('.jt-grid .jt-rank[data-phase="f"]')).to_have_count(1)
        expect(task.locator(".jt-log .jt-line").filter(has_text="step=1 loss=0.400")).to_have_count(
            1, timeout=JOB_TIMEOUT_MS)
        no_page_errors(page)
    finally:  # leave nothing running whatever failed (a no-op once every task has ended)
        with contextlib.suppress(OSError, urllib.error.URLError):
            local_lab.api(f"/jupyter-tiers/api/jobs/local/{array_id}/cancel", method="POST")
