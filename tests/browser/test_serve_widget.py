"""The ServeView widget in a real JupyterLab in headless chromium, on services of the Kubernetes
API emulator (tests/k8s_emulator: its kubelet runs the pods as local processes).

Each test writes a notebook whose ``%%k8s_serve`` cell uses the ``serving`` profile of
``serve_lab``, runs it the way a person does and looks at the DOM the widget rendered. Every wait
is bounded by a Playwright timeout; nothing asserts how fast anything was.
"""

from __future__ import annotations

import os
import re
import shutil
import urllib.request
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import OUTPUT, ROOT, Lab, ServeCluster
from .test_job_widget import confirm, no_page_errors, open_notebook, run_cell, write_notebook

pytestmark = [pytest.mark.browser]

# Pods start, get probed and crash-loop on the emulator's clock (first back-off 10 s): generous.
SERVE_TIMEOUT_MS = 180_000
HOSTILE_B = "<b>not bold</b>"

WEB_BODY = f"""
import http.server, os, sys
class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"hello from {{os.environ.get('HOSTNAME', '?')}}\\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, fmt, *args):
        print(f"request {{self.command}} {{self.path}}", flush=True)
print({HOSTILE_B!r}, flush=True)
print(f"python {{sys.version.split()[0]}}: serving on 0.0.0.0:8000", flush=True)
http.server.ThreadingHTTPServer(("0.0.0.0", 8000), Hello).serve_forever()
"""


def pod_rows(widget: Any) -> Any:
    return widget.locator("table.jt-pods tbody tr.jt-pod")


def expect_pods_running_and_ready(widget: Any, count: int) -> None:
    """``count`` pod rows, each Running and ready (no problem shown)."""
    rows = pod_rows(widget)
    expect(rows).to_have_count(count, timeout=SERVE_TIMEOUT_MS)
    expect(widget.locator('tr.jt-pod[data-phase="Running"]')).to_have_count(count, timeout=SERVE_TIMEOUT_MS)
    expect(widget.locator('tr.jt-pod .jt-pod-ready[data-ready="1"]')).to_have_count(
        count, timeout=SERVE_TIMEOUT_MS)
    for row in rows.all():
        expect(row).to_be_visible()
        expect(row.locator(".jt-pod-phase")).to_have_text("Running")
        expect(row.locator(".jt-pod-ready")).to_have_text("✓")
        expect(row.locator(".jt-pod-problem")).to_have_text("")


def test_live_service_widget_scales_forwards_and_deletes(
    page: Any, serve_lab: Lab, serve_cluster: ServeCluster
) -> None:
    ns = serve_cluster.namespace
    name = write_notebook(
        serve_lab,
        "ui-serve.ipynb",
        "%load_ext jupyter_tiers",
        "%%k8s_serve --profile serving --name web --replicas 2 --port 8000\n" + WEB_BODY.strip("\n"),
    )
    cells = open_notebook(page, serve_lab, name)
    run_cell(page, cells, 0)
    cell = run_cell(page, cells, 1)
    widget = cell.locator(".jt-serve")
    expect(widget).to_be_visible()
    expect(widget.locator(".jt-title")).to_have_text("service web")
    expect(widget.locator(".jt-where")).to_have_text(f"serving · {ns}")

    # READY 2/2: two pods Running and ready, the in-cluster endpoint, the rollout bar full.
    expect(widget.locator(".jt-state")).to_have_text("READY", timeout=SERVE_TIMEOUT_MS)
    expect(widget.locator(".jt-ready-count")).to_have_text("READY 2/2", timeout=SERVE_TIMEOUT_MS)
    expect_pods_running_and_ready(widget, 2)
    expect(widget.locator(".jt-endpoint")).to_have_text(f"http://web.{ns}.svc:8000")
    expect(widget.locator(".jt-endpoint")).to_be_visible()
    expect(widget.locator(".jt-rollout-text")).to_have_text(
        "2 updated · 2 ready · 2 available of 2 desired", timeout=SERVE_TIMEOUT_MS)
    expect(widget.locator(".jt-replicas")).to_have_text("2")
    expect(widget.locator(".jt-rollout")).to_be_visible()

    # The pods' log, each line prefixed with its pod (the name without the service's "web-").
    pods = pod_rows(widget).locator(".jt-pod-name").all_text_contents()
    assert len(pods) == 2 and all(p.startswith("web-") for p in pods), pods
    log = widget.locator(".jt-log")
    for pod in pods:
        line = log.locator(".jt-line").filter(has_text="serving on 0.0.0.0:8000").filter(
            has=page.locator(".jt-prefix", has_text=f"{pod.removeprefix('web-')}:"))
        expect(line).to_have_count(1, timeout=SERVE_TIMEOUT_MS)
        expect(line).to_be_visible()

    # Text from the cluster is text: the literal markup is visible, no <b> was made of it.
    hostile = log.locator(".jt-text").filter(has_text=HOSTILE_B)
    expect(hostile).to_have_count(2, timeout=SERVE_TIMEOUT_MS)
    expect(hostile.first).to_be_visible()
    expect(hostile.first).to_have_text(HOSTILE_B)
    expect(widget.locator("b")).to_have_count(0)

    # Port-forward: a local URL is shown, and it serves (the request shows up in the log).
    widget.locator(".jt-forward").click()
    forward = widget.locator(".jt-forward-url")
    expect(forward).to_have_text(re.compile(r"^http://127\.0\.0\.1:\d+/?$"), timeout=SERVE_TIMEOUT_MS)
    expect(forward).to_be_visible()
    url = forward.text_content().strip()
    expect(forward).to_have_attribute("href", url)
    expect(widget.locator(".jt-message")).to_have_text(f"port-forward open: {url}")
    with urllib.request.urlopen(url.rstrip("/") + "/from-the-test", timeout=30) as resp:
        assert resp.status == 200
        answer = resp.read().decode()
    assert re.fullmatch(r"hello from web-\S+\n", answer), answer
    served_by = answer.split()[-1]
    assert served_by in pods, (served_by, pods)
    request_line = log.locator(".jt-line").filter(has_text="request GET /from-the-test")
    expect(request_line).to_have_count(1, timeout=SERVE_TIMEOUT_MS)
    expect(request_line.locator(".jt-prefix")).to_have_text(f"{served_by.removeprefix('web-')}: ")

    # The picture of a READY service: 2 pods, its log (docs/serve-widget.png on request).
    OUTPUT.mkdir(exist_ok=True)
    page.mouse.move(0, 0)
    cell.screenshot(path=str(OUTPUT / "serve-widget.png"))
    if os.environ.get("JT_UPDATE_DOCS_SCREENSHOT"):  # refresh the README's picture on purpose only
        shutil.copyfile(OUTPUT / "serve-widget.png", ROOT / "docs" / "serve-widget.png")

    # Scale +: 3 desired at once, then READY 3/3 with a third Running pod.
    widget.locator(".jt-scale-up").click()
    expect(widget.locator(".jt-replicas")).to_have_text("3")
    expect(widget.locator(".jt-ready-count")).to_have_text(re.compile(r"^READY \d/3$"),
                                                           timeout=SERVE_TIMEOUT_MS)
    expect(widget.locator(".jt-message")).to_have_text("scaling web to 3 replicas", timeout=SERVE_TIMEOUT_MS)
    expect(widget.locator(".jt-ready-count")).to_have_text("READY 3/3", timeout=SERVE_TIMEOUT_MS)
    expect(widget.locator(".jt-state")).to_have_text("READY", timeout=SERVE_TIMEOUT_MS)
    expect_pods_running_and_ready(widget, 3)
    expect(widget.locator(".jt-replicas")).to_have_text("3")
    expect(widget.locator(".jt-summary")).to_contain_text("service web READY 3/3", timeout=SERVE_TIMEOUT_MS)

    # Delete needs a confirming second click.
    delete = widget.locator(".jt-delete")
    delete.click()
    expect(delete).to_have_text("Really delete?")
    expect(delete).to_have_attribute("data-confirm", "1")
    expect(widget.locator(".jt-state")).to_have_text("READY")
    confirm(delete)
    expect(widget.locator(".jt-state")).to_have_text("DELETED", timeout=SERVE_TIMEOUT_MS)
    expect(widget.locator(".jt-message")).to_have_text("service web deleted", timeout=SERVE_TIMEOUT_MS)
    expect(widget.locator(".jt-ready-count")).to_have_text("")
    expect(widget.locator(".jt-rollout")).to_be_hidden()
    for button in (".jt-delete", ".jt-restart", ".jt-forward", ".jt-scale-up", ".jt-scale-down"):
        expect(widget.locator(button)).to_be_disabled()
    expect(delete).to_have_text("Delete")
    expect(widget.locator(".jt-summary")).to_contain_text("service web DELETED")
    # The cluster agrees: no Deployment, no Service left.
    api = serve_cluster.emulator.store
    assert api.get("deployments", ns, "web") is None
    assert api.get("services", ns, "web") is None
    cell.screenshot(path=str(OUTPUT / "serve-widget-deleted.png"))
    no_page_errors(page)


def test_crashing_service_shows_crashloop_and_failed(
    page: Any, serve_lab: Lab, serve_cluster: ServeCluster
) -> None:
    name = write_notebook(
        serve_lab,
        "ui-serve-fail.ipynb",
        "%load_ext jupyter_tiers",
        """
        %%k8s_serve --profile serving --name broken --replicas 1 --port 8000
        print("starting up", flush=True)
        import no_such_module_for_this_server
        """,
    )
    cells = open_notebook(page, serve_lab, name)
    run_cell(page, cells, 0)
    cell = run_cell(page, cells, 1)
    widget = cell.locator(".jt-serve")
    expect(widget.locator(".jt-title")).to_have_text("service broken")

    expect(widget.locator(".jt-state")).to_have_text("FAILED", timeout=SERVE_TIMEOUT_MS)
    rows = pod_rows(widget)
    expect(rows).to_have_count(1)
    row = rows.first
    pod = row.locator(".jt-pod-name").text_content()
    assert pod.startswith("broken-"), pod
    expect(row.locator(".jt-pod-problem")).to_contain_text("CrashLoopBackOff", timeout=SERVE_TIMEOUT_MS)
    expect(row.locator(".jt-pod-problem")).to_contain_text(re.compile(r"\(exit 1, \d+ restarts?\)"))
    expect(row.locator(".jt-pod-ready")).to_have_text("✗")
    expect(row).to_have_class(re.compile(r"\bjt-not-ready\b"))
    expect(row).to_be_visible()
    reason = widget.locator(".jt-serve-reason")
    expect(reason).to_be_visible()
    expect(reason).to_contain_text(pod)
    expect(reason).to_contain_text(re.compile(r"CrashLoopBackOff|Error"))
    expect(widget.locator(".jt-ready-count")).to_have_text("READY 0/1")
    expect(widget.locator(".jt-summary")).to_contain_text("service broken FAILED")

    # The traceback is in the log, prefixed with the pod and marked as an error.
    error_line = widget.locator(".jt-log .jt-line.jt-error").filter(
        has_text="ModuleNotFoundError: No module named 'no_such_module_for_this_server'")
    expect(error_line.first).to_be_visible(timeout=SERVE_TIMEOUT_MS)
    expect(error_line.first.locator(".jt-prefix")).to_have_text(f"{pod.removeprefix('broken-')}: ")
    expect(widget.locator(".jt-jump-error")).to_be_enabled()
    OUTPUT.mkdir(exist_ok=True)
    cell.screenshot(path=str(OUTPUT / "serve-widget-failed.png"))
    no_page_errors(page)
