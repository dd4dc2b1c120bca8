"""ServeView's Load panel in a real JupyterLab (headless chromium) on a local service whose
replica counts requests (tests/local_serve/count_server.py): a short run draws its latency and
throughput charts with the ready replicas and ends ``done`` with every request counted; a long
one shows a scale-up on the chart and stops on Stop; a hostile path comes back as text. Every
wait is bounded by a Playwright timeout; nothing asserts how fast."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.chart_checks import check_chart
from tests.browser.conftest import OUTPUT, Lab, _running_lab
from tests.browser.test_job_widget import confirm, no_page_errors, open_notebook, run_cell, write_notebook
from tests.local_serve.conftest import service_processes

pytestmark = [pytest.mark.browser]

TIMEOUT_MS = 120_000
COUNT_BODY = (Path(__file__).resolve().parents[1] / "local_serve" / "count_server.py").read_text()
HOSTILE = "/<b>bold</b>"


@pytest.fixture(scope="module")
def load_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """JupyterLab whose kernels have one local profile (no cluster), load_limit_rps 100."""
    base = tmp_path_factory.mktemp("load-lab")
    tiers_yaml = (f"profiles:\n  laptop:\n    tier: local\n    workdir: {base / 'work'}\n"
                  "    load_limit_rps: 100\n")
    with _running_lab(base, tiers_yaml) as server:
        yield server
    assert service_processes(base / "work" / "services") == []


def server_count(url: str) -> int:
    with urllib.request.urlopen(url + "/__stats", timeout=30) as resp:
        return int(json.loads(resp.read())["count"])


def set_value(widget: Any, selector: str, value: str) -> None:
    field = widget.locator(selector)
    field.fill(value)
    expect(field).to_have_value(value)


def test_load_panel_runs_charts_and_stops(page: Any, load_lab: Lab) -> None:
    name = write_notebook(load_lab, "load.ipynb", "%load_ext jupyter_tiers",
                          "%%k8s_serve --profile laptop --name loadweb\n" + COUNT_BODY)
    cells = open_notebook(page, load_lab, name)
    run_cell(page, cells, 0)
    cell = run_cell(page, cells, 1)
    widget = cell.locator(".jt-serve")
    expect(widget.locator(".jt-ready-count")).to_have_text("READY 1/1", timeout=TIMEOUT_MS)
    url = (widget.locator(".jt-endpoint").text_content() or "").strip()
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url), url

    panel = widget.locator("details.jt-load")
    panel.locator("summary").click()
    expect(panel.locator(".jt-load-start")).to_be_visible()
    expect(panel.locator(".jt-load-rps")).to_have_attribute("max", "100")  # the profile's limit

    # A hostile path is refused in the kernel; the refusal shows as text, no <b> made of it.
    set_value(panel, ".jt-load-path", HOSTILE)
    panel.locator(".jt-load-start").click()
    expect(panel.locator(".jt-load-state")).to_have_text("error", timeout=TIMEOUT_MS)
    expect(panel.locator(".jt-load-message")).to_contain_text("load test not started: request.path")
    expect(panel.locator(".jt-load-message")).to_contain_text(HOSTILE)
    expect(widget.locator("b")).to_have_count(0)
    # Over the profile's limit: refused, naming it.
    set_value(panel, ".jt-load-path", "/hello")
    set_value(panel, ".jt-load-rps", "150")
    panel.locator(".jt-load-start").click()
    expect(panel.locator(".jt-load-message")).to_contain_text(
        "rps: 150 is over the load_limit_rps of profile 'laptop' (100)", timeout=TIMEOUT_MS)
    assert server_count(url) == 0

    # A short run: done, every sent request counted by the server, charts drawn per second. As
    # many in flight as it sends: a service slowed by a busy machine delays answers, drops none.
    set_value(panel, ".jt-load-rps", "20")
    set_value(panel, ".jt-load-seconds", "3")
    set_value(panel, ".jt-load-concurrency", "60")
    panel.locator(".jt-load-start").click()
    expect(panel.locator(".jt-load-state")).to_have_text("done", timeout=TIMEOUT_MS)
    summary = panel.locator(".jt-load-summary")
    expect(summary).to_have_attribute("data-sent", "60")
    expect(summary).to_contain_text("60 sent")
    expect(summary).to_have_attribute("data-error-rate", "0")
    assert server_count(url) == 60
    charts = panel.locator(".jt-load-charts")
    rows = int(charts.get_attribute("data-rows") or 0)
    assert rows >= 3, rows
    expect(charts).to_have_attribute("data-ready", "1")
    expect(charts).to_have_attribute("data-drawn", str(rows))  # over: every second is drawn
    latency = panel.locator(".jt-load-latency")
    p50 = latency.locator('.jt-uchart-item[data-series="p50"]').get_attribute("data-value")
    assert p50 and float(p50) > 0, p50
    check_chart(latency, ["s since start", "ms"], {})
    check_chart(panel.locator(".jt-load-traffic"), ["s since start", "answers/s", "replicas"], {"ready": "1"})
    check_chart(panel.locator(".jt-load-failures"), ["s since start", "requests/s"],
                {"dropped": "0", "errors": "0"}, hover=False)
    expect(panel.locator(".jt-load-start")).to_be_enabled()
    expect(panel.locator(".jt-load-stop")).to_be_disabled()
    OUTPUT.mkdir(exist_ok=True)
    panel.screenshot(path=str(OUTPUT / "load-panel.png"))

    # A long run: scaling up shows on the chart as 2 ready replicas; Stop ends it.
    set_value(panel, ".jt-load-seconds", "600")
    panel.locator(".jt-load-start").click()
    expect(panel.locator(".jt-load-state")).to_have_text("running", timeout=TIMEOUT_MS)
    expect(panel.locator(".jt-load-start")).to_be_disabled()
    widget.locator(".jt-scale-up").click()
    expect(widget.locator(".jt-ready-count")).to_have_text("READY 2/2", timeout=TIMEOUT_MS)
    expect(charts).to_have_attribute("data-ready", "2", timeout=TIMEOUT_MS)
    # Running: the second being counted is not drawn (it would read as a drop), and says so.
    drawn, rows = int(charts.get_attribute("data-drawn") or 0), int(charts.get_attribute("data-rows") or 0)
    assert drawn < rows, (drawn, rows)
    expect(panel.locator(".jt-load-pending")).to_contain_text("still being counted")
    panel.locator(".jt-load-stop").click()
    expect(panel.locator(".jt-load-state")).to_have_text("stopped", timeout=TIMEOUT_MS)
    expect(panel.locator(".jt-load-message")).to_contain_text("stopped: ")
    expect(panel.locator(".jt-load-pending")).to_contain_text("cut short by Stop: not drawn")
    drawn, rows = int(charts.get_attribute("data-drawn") or 0), int(charts.get_attribute("data-rows") or 0)
    assert drawn == rows - 1, (drawn, rows)
    sent = int(summary.get_attribute("data-sent") or 0)
    assert 0 < sent < 20 * 600
    panel.screenshot(path=str(OUTPUT / "load-panel-stopped.png"))

    delete = widget.locator(".jt-delete")
    delete.click()
    confirm(delete)
    expect(widget.locator(".jt-state")).to_have_text("DELETED", timeout=TIMEOUT_MS)
    no_page_errors(page)
