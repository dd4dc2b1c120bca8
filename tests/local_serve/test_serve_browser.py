"""The ServeView widget, unchanged, on a local service: a real JupyterLab in headless chromium
whose kernels have no tiers.yaml profile but a local one, so ``%%k8s_serve`` runs the replicas as
local processes. Every wait is bounded by a Playwright timeout; nothing asserts how fast."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Lab, _running_lab, browser, page  # noqa: F401 - fixtures
from tests.browser.test_job_widget import no_page_errors, open_notebook, run_cell, write_notebook

from .conftest import HTTP_BODY, service_processes, wait_for

pytestmark = [pytest.mark.browser]

TIMEOUT_MS = 120_000


@pytest.fixture(scope="module")
def local_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    base = tmp_path_factory.mktemp("local-serve-lab")
    tiers_yaml = f"profiles:\n  laptop:\n    tier: local\n    workdir: {base / 'work'}\n"
    with _running_lab(base, tiers_yaml) as server:
        yield server
    assert service_processes(base / "work" / "services") == []  # ("work" alone also names workspaces/)


def test_serve_view_on_the_local_tier(page: Any, local_lab: Lab) -> None:  # noqa: F811 - fixture
    name = write_notebook(
        local_lab, "local-serve.ipynb", "%load_ext jupyter_tiers",
        "%%k8s_serve --profile laptop --name web --replicas 2 --readiness /health --gpus 1\n" + HTTP_BODY,
    )
    cells = open_notebook(page, local_lab, name)
    run_cell(page, cells, 0)
    cell = run_cell(page, cells, 1)
    widget = cell.locator(".jt-serve")
    expect(widget).to_be_visible()
    expect(widget.locator(".jt-title")).to_have_text("service web")
    expect(widget.locator(".jt-where")).to_have_text("laptop")
    expect(widget.locator(".jt-state")).to_have_text("READY", timeout=TIMEOUT_MS)
    expect(widget.locator(".jt-ready-count")).to_have_text("READY 2/2", timeout=TIMEOUT_MS)
    rows = widget.locator("table.jt-pods tbody tr.jt-pod")
    expect(rows).to_have_count(2)
    expect(widget.locator('tr.jt-pod .jt-pod-ready[data-ready="1"]')).to_have_count(2, timeout=TIMEOUT_MS)
    expect(widget.locator(".jt-banner")).to_have_text("not applied on the local tier: gpus=1")
    endpoint = widget.locator(".jt-endpoint")
    expect(endpoint).to_have_text(re.compile(r"^http://127\.0\.0\.1:\d+$"))
    url = (endpoint.text_content() or "").strip()
    pods = rows.locator(".jt-pod-name").all_text_contents()
    with urllib.request.urlopen(url, timeout=30) as resp:
        assert resp.read().decode() in pods
    line = widget.locator(".jt-log .jt-line").filter(has_text="listening on")
    expect(line).to_have_count(2, timeout=TIMEOUT_MS)

    # Port-forward on the local tier is the service's own URL.
    widget.locator(".jt-forward").click()
    expect(widget.locator(".jt-forward-url")).to_have_text(re.compile(re.escape(url) + "/?$"),
                                                           timeout=TIMEOUT_MS)
    # Scale −: one replica left, same URL.
    widget.locator(".jt-scale-down").click()
    expect(widget.locator(".jt-ready-count")).to_have_text("READY 1/1", timeout=TIMEOUT_MS)
    expect(rows).to_have_count(1, timeout=TIMEOUT_MS)
    # Delete (confirmed): DELETED, and no process of the service is left.
    delete = widget.locator(".jt-delete")
    delete.click()
    delete.click()
    expect(widget.locator(".jt-state")).to_have_text("DELETED", timeout=TIMEOUT_MS)
    services = local_lab.root.parent / "work" / "services"
    wait_for(lambda: service_processes(services) == [], "no process of the service left")
    no_page_errors(page)


def test_try_it_on_the_local_tier(page: Any, local_lab: Lab) -> None:  # noqa: F811 - fixture
    """Try it through the front port: a JSON body echoed with the replica that answered, and a
    chat whose first pieces show before the server lets the rest go (released from the panel)."""
    server = (Path(__file__).parent.parent / "openai_server.py").read_text()
    name = write_notebook(local_lab, "local-try-it.ipynb", "%load_ext jupyter_tiers",
                          "%%k8s_serve --profile laptop --name llm --readiness /health\n" + server)
    cells = open_notebook(page, local_lab, name)
    run_cell(page, cells, 0)
    widget = run_cell(page, cells, 1).locator(".jt-serve")
    expect(widget.locator(".jt-ready-count")).to_have_text("READY 1/1", timeout=TIMEOUT_MS)
    replica = widget.locator("tr.jt-pod .jt-pod-name").first.text_content()
    widget.locator(".jt-try-toggle").click()
    expect(widget.locator(".jt-try-detect")).to_have_text("OpenAI-compatible: 1 model", timeout=TIMEOUT_MS)
    request = widget.locator(".jt-try-request")
    request.locator(".jt-try-body-kind").select_option("json")
    request.locator(".jt-try-path").fill("/echo")
    request.locator(".jt-try-body-in").fill('{"where": "local"}')
    request.locator(".jt-try-send").click()  # JSON body: the method became POST
    expect(request.locator(".jt-try-status")).to_have_text("200 OK", timeout=TIMEOUT_MS)
    expect(request.locator(".jt-try-who")).to_have_text(f"answered by {replica}")
    expect(request.locator(".jt-try-body")).to_contain_text('"body": "{\\"where\\": \\"local\\"}"')

    widget.locator(".jt-chat-input").fill("alpha beta gamma [hold]")
    widget.locator(".jt-chat-send").click()
    answer = widget.locator(".jt-chat-assistant").last
    expect(answer.locator(".jt-chat-text")).to_have_text("echo: alpha beta ", timeout=TIMEOUT_MS)
    expect(answer).to_have_attribute("data-state", "streaming")
    request.locator(".jt-try-body-kind").select_option("none")
    request.locator(".jt-try-path").fill("/test/release")
    request.locator(".jt-try-send").click()
    expect(answer).to_have_attribute("data-state", "done", timeout=TIMEOUT_MS)
    expect(answer.locator(".jt-chat-text")).to_have_text("echo: alpha beta gamma [hold]")
    # svc.chat asks for the usage (stream_options) and the test server sends it: tokens, the server's.
    expect(widget.locator(".jt-chat-stats")).to_contain_text(
        f"5 pieces · 5 tokens (prompt 5), the server's count · answered by {replica}")

    # Issue 28 §4: a stream with every quirk of real servers (a role-only first chunk, keep-alive
    # comments, reasoning pieces, finish_reason eos_token, a last usage chunk with empty choices):
    # the reasoning shows apart from the answer, no comment shows as text, the usage counts tokens.
    widget.locator(".jt-chat-input").fill("delta epsilon [quirks]")
    widget.locator(".jt-chat-send").click()
    quirky = widget.locator(".jt-chat-assistant").last
    expect(quirky).to_have_attribute("data-state", "done", timeout=TIMEOUT_MS)
    expect(quirky.locator(".jt-chat-text")).to_have_text("echo: delta epsilon [quirks]")
    expect(quirky.locator(".jt-chat-reasoning")).to_have_text("thinking about it still thinking")
    # In the model's bubble, just above its answer (the chat layout), not part of it.
    expect(quirky.locator(".jt-chat-bubble > .jt-chat-reasoning + .jt-chat-text")).to_have_count(1)
    # 6 pieces (2 of them reasoning), 9 tokens as the usage counts them (the reasoning's 5 too).
    expect(widget.locator(".jt-chat-stats")).to_contain_text(
        f"6 pieces · 9 tokens (prompt 5), the server's count · answered by {replica}")
    # An error in the stream after HTTP 200 ends the answer with it, not as an empty success.
    widget.locator(".jt-chat-input").fill("zeta eta theta [inband-error]")
    widget.locator(".jt-chat-send").click()
    failed = widget.locator(".jt-chat-assistant").last
    expect(failed).to_have_attribute("data-state", "error", timeout=TIMEOUT_MS)
    expect(failed.locator(".jt-chat-text")).to_have_text("echo: zeta ")
    expect(failed.locator(".jt-chat-error")).to_have_text(
        "chat: the server sent an error: the engine died: CUDA error <b>x</b>")
    assert failed.locator(".jt-chat-error b").count() == 0  # the server's text shown as text

    delete = widget.locator(".jt-delete")
    delete.click()
    delete.click()
    expect(widget.locator(".jt-state")).to_have_text("DELETED", timeout=TIMEOUT_MS)
    services = local_lab.root.parent / "work" / "services"
    wait_for(lambda: service_processes(services) == [], "no process of the service left")
    no_page_errors(page)


def test_canary_buttons_on_the_local_tier(page: Any, local_lab: Lab) -> None:  # noqa: F811 - fixture
    """A canary cell's widget shows the canary's line and its two buttons; Promote (confirmed)
    rolls every replica to it and the line goes; the live cell's widget follows too."""
    v2 = HTTP_BODY.replace("body = NAME.encode()", 'body = ("v2 " + NAME).encode()')
    name = write_notebook(
        local_lab, "local-canary.ipynb", "%load_ext jupyter_tiers",
        "%%k8s_serve --profile laptop --name cn --replicas 2 --readiness /health\n" + HTTP_BODY,
        "%%k8s_serve --profile laptop --name cn --replicas 2 --readiness /health --canary 50\n" + v2,
    )
    cells = open_notebook(page, local_lab, name)
    run_cell(page, cells, 0)
    live = run_cell(page, cells, 1).locator(".jt-serve")
    expect(live.locator(".jt-ready-count")).to_have_text("READY 2/2", timeout=TIMEOUT_MS)
    expect(live.locator(".jt-canary")).to_be_hidden()
    widget = run_cell(page, cells, 2).locator(".jt-serve")
    text = widget.locator(".jt-canary-text")
    expect(text).to_have_text("canary 50 %: READY 1/1, 0 restarts", timeout=TIMEOUT_MS)
    # The header counts both tracks while the canary runs (issue 29 §3)
    expect(widget.locator(".jt-ready-count")).to_have_text("READY 2/2 (stable 1/1 · canary 1/1)",
                                                           timeout=TIMEOUT_MS)
    expect(live.locator(".jt-canary-text")).to_have_text("canary 50 %: READY 1/1, 0 restarts",
                                                         timeout=TIMEOUT_MS)
    promote = widget.locator(".jt-promote")
    promote.click()
    expect(promote).to_have_text("Really promote the canary?")
    promote.click()
    expect(widget.locator(".jt-message")).to_contain_text("canary promoted", timeout=TIMEOUT_MS)
    expect(widget.locator(".jt-canary")).to_be_hidden(timeout=TIMEOUT_MS)
    expect(widget.locator(".jt-ready-count")).to_have_text("READY 2/2", timeout=TIMEOUT_MS)
    url = (widget.locator(".jt-endpoint").text_content() or "").strip()
    wait_for(lambda: all(_answer(url).startswith("v2 ") for _ in range(4)),
             "both replicas on the canary's revision")
    delete = widget.locator(".jt-delete")
    delete.click()
    delete.click()
    expect(widget.locator(".jt-state")).to_have_text("DELETED", timeout=TIMEOUT_MS)
    services = local_lab.root.parent / "work" / "services"
    wait_for(lambda: service_processes(services) == [], "no process of the service left")
    no_page_errors(page)


def _answer(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return str(resp.read().decode())
    except OSError:  # a replica going away while the rollout ends
        return ""
