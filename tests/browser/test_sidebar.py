"""The "Tiers" sidebar (labextension/) in a real JupyterLab and Notebook 7 in headless chromium,
on real Slurm jobs of the test cluster, through the real server extension.

Jobs are submitted with the Python API into the lab server's registry (the sidebar shows every job
of the registry, whichever process started it). Every wait is bounded by a Playwright timeout;
nothing asserts how fast anything was.
"""

from __future__ import annotations

import json
import re
import textwrap
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from jupyter_tiers.config.profiles import load_config
from jupyter_tiers.config.registry import Registry
from jupyter_tiers.core.model import JobState
from jupyter_tiers.engine.handles import Job
from jupyter_tiers.k8s.tier import K8sTier
from jupyter_tiers.slurm.tier import SlurmTier

from .conftest import API_TIMEOUT_S, JOB_TIMEOUT_MS, OUTPUT, Lab, ServeCluster
from .test_job_widget import run_cell

pytestmark = [pytest.mark.browser]
# The Slurm tests; the service test needs only the in-process Kubernetes API emulator.
cluster = pytest.mark.cluster

SIDEBAR_ID = "jupyter-tiers-sidebar"
DARK = "JupyterLab Dark"
LIGHT = "JupyterLab Light"


def submit(tier: SlurmTier, name: str, body: str, nodes: int = 2) -> Job:
    return tier.submit(tier.make_spec(textwrap.dedent(body).strip("\n"), nodes=nodes, name=name))


@pytest.fixture(scope="module")
def tiers_lab(lab: Lab) -> Lab:
    """``lab``, after checking that the server extension answers (installed with the package)."""
    try:
        profiles = lab.api("/jupyter-tiers/api/profiles")
    except OSError as exc:
        pytest.fail(f"the jupyter-tiers server extension does not answer ({exc}); "
                    f"`jupyter server extension list` should show it enabled:\n{lab.log_tail()}")
    assert "box" in [p["name"] for p in profiles["profiles"]], profiles
    return lab


def set_theme(lab: Lab, theme: str) -> None:
    """The user setting of the theme, through JupyterLab's settings API (a reload applies it)."""
    body = json.dumps({"raw": json.dumps({"theme": theme})}).encode()
    req = urllib.request.Request(
        f"{lab.url}/lab/api/settings/@jupyterlab/apputils-extension:themes",
        data=body,
        method="PUT",
        headers={"Authorization": f"token {lab.token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=API_TIMEOUT_S) as resp:
        assert resp.status in (200, 204), resp.status


def open_lab(page: Any, lab: Lab) -> Any:
    """Open JupyterLab (empty workspace), check the extension loaded, open the Tiers sidebar."""
    page.goto(f"{lab.url}/lab?reset&token={lab.token}")
    config = page.evaluate("JSON.parse(document.getElementById('jupyter-config-data').textContent)")
    assert "jupyter-tiers" in [ext["name"] for ext in config["federated_extensions"]], config
    tab = page.locator(f'.jp-SideBar [data-id="{SIDEBAR_ID}"]')
    expect(tab).to_be_visible()
    tab.click()
    side = page.locator(f"#{SIDEBAR_ID}")
    expect(side).to_be_visible()
    expect(side.locator(".jt-side-empty")).not_to_have_text("Loading…")
    return side


def row_of(side: Any, job: Job) -> Any:
    return side.locator(f'.jt-side-row[data-key="{job.record.key}"]')


def no_page_errors(page: Any) -> None:
    assert page.jt_dialogs == [], f"the page opened dialogs: {page.jt_dialogs}"
    assert page.jt_errors == [], f"uncaught errors in the page: {page.jt_errors}"


@pytest.fixture
def running_job(tiers_lab: Lab, box_tier: SlurmTier) -> Iterator[Job]:
    job = submit(box_tier, "side-long", """
        import os, time
        print("long job rank", os.environ["RANK"], flush=True)
        time.sleep(600)
        """)
    yield job
    job.cancel()


@cluster
def test_sidebar_follows_a_job_to_completed_live_and_keeps_it_after_reload(
    page: Any, tiers_lab: Lab, box_tier: SlurmTier
) -> None:
    side = open_lab(page, tiers_lab)
    # A marker in the page: still there at the end means the state changed without a reload.
    page.evaluate("window.__jtSameDocument = true")
    job = submit(box_tier, "side-done", """
        import os, time
        rank = int(os.environ["RANK"])
        print("<img src=x onerror=alert(1)> <b>not bold</b>", flush=True)
        for i in range(6):
            print(f"step {i} from rank {rank}", flush=True)
            time.sleep(1)
        """)
    row = row_of(side, job)
    expect(row).to_be_visible(timeout=JOB_TIMEOUT_MS)
    expect(row.locator(".jt-side-name")).to_have_text(f"{job.id} · side-done")
    expect(row.locator(".jt-side-profile")).to_have_text("box")
    expect(row.locator(".jt-side-size")).to_have_text("2 ranks on 2 nodes")
    expect(row.locator(".jt-side-badge")).to_have_text("COMPLETED", timeout=JOB_TIMEOUT_MS)
    expect(row.locator(".jt-side-badge")).to_have_attribute("data-class", "ok")
    expect(row.locator(".jt-side-elapsed")).to_have_text(re.compile(r"^\d\d:\d\d:\d\d$"))
    expect(row.locator(".jt-side-cancel")).to_have_count(0)  # nothing to cancel once it ended
    assert page.evaluate("window.__jtSameDocument === true"), "the page reloaded"
    assert box_tier.status([job.record])[job.id].state is JobState.COMPLETED

    # Search and filters narrow the list; clearing them brings the row back.
    side.locator(".jt-side-search").fill(f"{job.id} side-done")
    expect(side.locator(".jt-side-row")).to_have_count(1)
    side.locator(".jt-side-search").fill("no-such-job-anywhere")
    expect(side.locator(".jt-side-row")).to_have_count(0)
    expect(side.locator(".jt-side-empty")).to_have_text(re.compile(r"^None of the \d+ jobs"))
    side.locator(".jt-side-search").fill("")
    side.locator(".jt-side-filter-state").select_option("(active)")
    expect(row).to_have_count(0)
    side.locator(".jt-side-filter-state").select_option("COMPLETED")
    expect(row).to_be_visible()
    side.locator(".jt-side-filter-state").select_option("")

    # A reload keeps the list (the server's registry, not the page, holds it).
    # JupyterLab's layout restorer reopens the sidebar itself (a click on its tab would close it).
    page.reload()
    side = page.locator(f"#{SIDEBAR_ID}")
    expect(side).to_be_visible()
    expect(row_of(side, job).locator(".jt-side-badge")).to_have_text("COMPLETED")
    # Refresh asks every cluster again (GET jobs) and keeps the row.
    side.locator(".jt-side-refresh").click()
    expect(side.locator(".jt-side-notice")).to_have_text("")
    expect(row_of(side, job).locator(".jt-side-badge")).to_have_text("COMPLETED")

    # The detail panel: the notebook widget's own view, with its rank grid and the log. It reads
    # from the server's shared watch (?refresh=0); its toolbar's Refresh asks the cluster.
    details_url = f"/jupyter-tiers/api/jobs/box/{job.id}"
    with page.expect_request(lambda r: r.url.split("?")[0].endswith(details_url)) as first_read:
        row_of(side, job).click()
    assert "refresh=0" in first_read.value.url, first_read.value.url
    detail = page.locator(".jt-detail").filter(has=page.locator(".jt-job"))
    expect(detail).to_be_visible()
    with page.expect_request(lambda r: r.url.split("?")[0].endswith(details_url)) as asked:
        page.locator(".jt-detail-panel .jt-detail-refresh").filter(visible=True).first.click()
    assert "refresh=0" not in asked.value.url, asked.value.url
    view = detail.locator(".jt-job")
    expect(view.locator(".jt-title")).to_have_text(f"job {job.id} · side-done")
    expect(view.locator(".jt-state")).to_have_text("COMPLETED")
    expect(view.locator(".jt-grid .jt-rank")).to_have_count(2)
    expect(view.locator('.jt-rank[data-phase="x"]')).to_have_count(2)
    for rank in range(2):
        line = view.locator(".jt-log .jt-line").filter(has_text=f"step 5 from rank {rank}")
        expect(line).to_have_count(1, timeout=JOB_TIMEOUT_MS)
        expect(line.locator(".jt-prefix")).to_have_text(f"{rank}:")
    expect(view.locator(".jt-summary")).to_have_text(re.compile(rf"^job {job.id} COMPLETED in "))
    # Cluster text is text: the markup is shown, not run (no alert dialog, no <b> or <img>).
    hostile = view.locator(".jt-log .jt-line").filter(has_text="<img src=x onerror=alert(1)>")
    expect(hostile).to_have_count(2)
    expect(view.locator(".jt-log img, .jt-log b")).to_have_count(0)
    no_page_errors(page)


@cluster
def test_cancel_asks_first_then_cancels_the_running_job(
    page: Any, tiers_lab: Lab, box_tier: SlurmTier, running_job: Job
) -> None:
    side = open_lab(page, tiers_lab)
    row = row_of(side, running_job)
    expect(row.locator(".jt-side-badge")).to_have_text("RUNNING", timeout=JOB_TIMEOUT_MS)
    expect(row.locator(".jt-side-where")).not_to_have_text("")

    # The elapsed column ticks in the page between server updates.
    first = row.locator(".jt-side-elapsed").text_content()
    expect(row.locator(".jt-side-elapsed")).not_to_have_text(first or "")

    # "Keep" in the confirmation leaves the job alone.
    row.locator(".jt-side-cancel").click()
    dialog = page.locator(".jp-Dialog")
    expect(dialog).to_contain_text(f"Cancel job {running_job.id} on box?")
    # Its buttons say what they do (issue 41 item 13): not a red "Cancel" beside "Keep".
    expect(dialog.locator(".jp-mod-warn")).to_have_text("Cancel job")
    dialog.locator("button", has_text="Keep running").click()
    expect(dialog).to_have_count(0)
    assert box_tier.status([running_job.record])[running_job.id].state is JobState.RUNNING

    row.locator(".jt-side-cancel").click()
    page.locator(".jp-Dialog .jp-mod-warn").click()
    expect(row.locator(".jt-side-badge")).to_have_text("CANCELLED", timeout=JOB_TIMEOUT_MS)
    expect(row.locator(".jt-side-cancel")).to_have_count(0)
    assert box_tier.status([running_job.record])[running_job.id].state is JobState.CANCELLED
    no_page_errors(page)


@cluster
def test_screenshots_light_and_dark(page: Any, tiers_lab: Lab, box_tier: SlurmTier,
                                    running_job: Job) -> None:
    """The panel in both themes (test-output/sidebar-{light,dark}.png); its colours follow the
    theme: the text colour differs between the two."""
    done = submit(box_tier, "side-shot", "print('done')", nodes=1)
    colours = {}
    try:
        for theme, tag in ((LIGHT, "light"), (DARK, "dark")):
            set_theme(tiers_lab, theme)
            side = open_lab(page, tiers_lab)
            expect(row_of(side, running_job).locator(".jt-side-badge")).to_have_text(
                "RUNNING", timeout=JOB_TIMEOUT_MS)
            expect(row_of(side, done).locator(".jt-side-badge")).to_have_text(
                "COMPLETED", timeout=JOB_TIMEOUT_MS)
            row_of(side, running_job).click()
            expect(page.locator(".jt-detail .jt-job .jt-rank")).to_have_count(2)
            expect(page.locator(".jt-detail .jt-log .jt-line").first).to_be_visible(timeout=JOB_TIMEOUT_MS)
            badge = page.locator(".jt-detail .jt-job .jt-state")
            expect(badge).to_have_text("RUNNING")
            colours[tag] = [
                *side.evaluate("el => [getComputedStyle(el).color, getComputedStyle(el).backgroundColor]"),
                badge.evaluate("el => getComputedStyle(el).backgroundColor")]
            OUTPUT.mkdir(exist_ok=True)
            page.screenshot(path=str(OUTPUT / f"sidebar-{tag}.png"))
    finally:
        set_theme(tiers_lab, LIGHT)
    # The sidebar's text and background, and the detail panel's state badge, all follow the theme.
    assert all(light != dark for light, dark in zip(colours["light"], colours["dark"], strict=True)), colours
    no_page_errors(page)


@cluster
def test_notebook7_tree_shows_the_panel_with_the_job(
    page: Any, tiers_lab: Lab, box_tier: SlurmTier, running_job: Job
) -> None:
    page.goto(f"{tiers_lab.url}/tree?token={tiers_lab.token}")
    config = page.evaluate("JSON.parse(document.getElementById('jupyter-config-data').textContent)")
    if config.get("appName") != "Jupyter Notebook":
        pytest.fail(f"/tree is not Notebook 7 (pip install 'notebook>=7'): {config.get('appName')}")
    expect(page.locator(".jp-DirListing")).to_be_visible()
    # The command palette's "Tiers: Show Sidebar" opens Notebook 7's left panel on the Tiers tab.
    page.keyboard.press("Control+Shift+C")
    palette = page.locator(".lm-CommandPalette-input")
    expect(palette).to_be_visible()
    palette.fill("Tiers: Show Sidebar")
    page.keyboard.press("Enter")
    side = page.locator(f"#{SIDEBAR_ID}")
    expect(side).to_be_visible()
    row = row_of(side, running_job)
    expect(row.locator(".jt-side-badge")).to_have_text("RUNNING", timeout=JOB_TIMEOUT_MS)
    expect(row.locator(".jt-side-profile")).to_have_text("box")
    # Notebook 7 keeps one widget in its main area: the detail opens in the right side panel.
    row.click()
    view = page.locator(".jt-detail .jt-job")
    expect(view.locator(".jt-title")).to_have_text(f"job {running_job.id} · side-long")
    expect(view.locator(".jt-grid")).to_be_visible()
    expect(view.locator(".jt-grid .jt-rank")).to_have_count(2)
    expect(view.locator(".jt-log .jt-line").filter(has_text="long job rank 1")).to_have_count(
        1, timeout=JOB_TIMEOUT_MS)
    OUTPUT.mkdir(exist_ok=True)
    page.screenshot(path=str(OUTPUT / "sidebar-notebook7.png"))
    # Notebook 7.6's tree page throws this one itself with JupyterLab 4.6 (also with jupyter-tiers
    # disabled): a settings schema it looks up is missing. Anything else is ours.
    page.jt_errors[:] = [e for e in page.jt_errors
                         if e != "Cannot read properties of undefined (reading 'schema')"]
    no_page_errors(page)


@cluster
def test_events_socket_reconnects_after_a_drop_and_catches_up(
    page: Any, tiers_lab: Lab, box_tier: SlurmTier
) -> None:
    """The page's events websocket, passed through Playwright, is cut once: the sidebar opens a
    new one after its back-off (one, not a storm) and shows a job submitted meanwhile."""
    sockets: list[Any] = []

    def relay(ws: Any) -> None:
        ws.connect_to_server()
        sockets.append(ws)

    page.route_web_socket(re.compile(r"/jupyter-tiers/api/events"), relay)
    side = open_lab(page, tiers_lab)
    expect(side.locator(".jt-side-empty")).not_to_have_text("Loading…")
    assert len(sockets) == 1
    sockets[0].close(code=1011, reason="test: connection lost")
    job = submit(box_tier, "side-after-drop", "print('hi')", nodes=1)
    expect(row_of(side, job).locator(".jt-side-badge")).to_have_text("COMPLETED", timeout=JOB_TIMEOUT_MS)
    assert len(sockets) == 2, f"{len(sockets)} connections after one drop"
    expect(side.locator(".jt-side-status")).to_have_text("")
    no_page_errors(page)


def expected_profile(lab: Lab, tiers: tuple[str, ...]) -> str:
    """What "Insert ... cell" fills in: the default profile if its tier fits, else the first."""
    answer = lab.api("/jupyter-tiers/api/profiles")
    fits = sorted(p["name"] for p in answer["profiles"] if p["tier"] in tiers)
    assert fits, answer
    return answer["default"] if answer["default"] in fits else fits[0]


def run_palette(page: Any, label: str) -> None:
    """Run a command from JupyterLab's command palette, opened from the View menu (the keyboard
    shortcut depends on where the focus is)."""
    page.locator(".lm-MenuBar-itemLabel", has_text="View").click()
    page.locator(".lm-Menu-itemLabel", has_text="Activate Command Palette").click()
    palette = page.locator(".lm-CommandPalette-input")
    expect(palette).to_be_visible()
    palette.fill(label)
    item = page.locator(".lm-CommandPalette-item").filter(has_text=label).first
    expect(item).to_be_visible()
    item.click()


@cluster
def test_insert_cell_commands_from_palette_and_launcher(page: Any, tiers_lab: Lab) -> None:
    profile = expected_profile(tiers_lab, ("slurm", "local"))
    # The launcher (an empty workspace shows it) has a Tiers section; its card makes a notebook
    # with %load_ext and the magic cell.
    page.goto(f"{tiers_lab.url}/lab?reset&token={tiers_lab.token}")
    section = page.locator(".jp-Launcher-section").filter(
        has=page.locator(".jp-Launcher-sectionTitle", has_text="Tiers"))
    expect(section).to_be_visible()
    expect(section.locator(".jp-LauncherCard")).to_have_count(3)
    section.locator(".jp-LauncherCard", has_text="Insert %%slurm_train cell").click()
    cells = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
    expect(cells).to_have_count(2)
    expect(cells.nth(0).locator(".cm-content")).to_have_text("%load_ext jupyter_tiers")
    expect(cells.nth(1).locator(".cm-content")).to_contain_text(
        f"%%slurm_train --profile {profile} --nodes 1")

    # From the palette, into the open notebook, below the active cell. (Once the kernel is up:
    # the notebook takes the focus when it connects, which closes a palette opened before.)
    expect(page.locator(".jp-StatusBar-TextItem").filter(
        has_text=re.compile(r"^Python 3 \(ipykernel\) \| Idle$"))).to_have_count(1)
    run_palette(page, "Tiers: Insert %%k8s_serve cell")
    expect(cells).to_have_count(3)
    expect(cells.nth(2).locator(".cm-content")).to_contain_text("%%k8s_serve")
    expect(cells.nth(2).locator(".cm-content")).to_contain_text("--image python:3.11-slim")

    # The inserted training cell is a valid one: it runs (on the default profile) and its job
    # shows up in the sidebar too.
    run_cell(page, cells, 0)
    run_cell(page, cells, 1)
    widget = cells.nth(1).locator(".jt-job")
    expect(widget.locator(".jt-state")).to_have_text("COMPLETED", timeout=JOB_TIMEOUT_MS)
    expect(widget.locator(".jt-log .jt-line").filter(has_text="rank 0 of 1")).to_have_count(1)
    job_id = widget.locator(".jt-title").text_content().split()[1]
    page.locator(f'.jp-SideBar [data-id="{SIDEBAR_ID}"]').click()
    side = page.locator(f"#{SIDEBAR_ID}")
    row = side.locator(f'.jt-side-row[data-key="{profile}/{job_id}"]')
    expect(row.locator(".jt-side-badge")).to_have_text("COMPLETED", timeout=JOB_TIMEOUT_MS)
    no_page_errors(page)


SERVE_TIMEOUT_MS = 180_000  # pods start and get probed on the emulator's clock
WEB_BODY = """
import http.server
class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"hello")
print("serving on 0.0.0.0:8000", flush=True)
http.server.ThreadingHTTPServer(("0.0.0.0", 8000), Hello).serve_forever()
"""


def test_service_rows_scale_and_delete_behind_dialogs_and_show_the_pod_table(
    page: Any, serve_lab: Lab, serve_cluster: ServeCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(serve_lab.config))
    tier = K8sTier(load_config().profile("serving"), Registry(serve_lab.registry))
    try:
        svc = tier.apply(tier.make_spec(WEB_BODY.strip("\n"), name="side-svc", replicas=1, port=8000))
        page.goto(f"{serve_lab.url}/lab?reset&token={serve_lab.token}")
        page.locator(f'.jp-SideBar [data-id="{SIDEBAR_ID}"]').click()
        side = page.locator(f"#{SIDEBAR_ID}")
        row = side.locator(f'.jt-side-row[data-key="{svc.record.key}"]')
        expect(row.locator(".jt-side-badge")).to_have_text("READY", timeout=SERVE_TIMEOUT_MS)
        expect(row).to_have_attribute("data-kind", "service")
        expect(row.locator(".jt-side-size")).to_have_text("1/1 ready")
        expect(row.locator(".jt-side-cancel")).to_have_count(0)

        # Scale asks the count; the dialog refuses a count out of 0-1000.
        row.locator(".jt-side-scale").click()
        page.locator(".jp-Dialog input").fill("-1")
        expect(page.locator(".jp-Dialog .jp-mod-accept")).to_be_disabled()
        page.locator(".jp-Dialog input").fill("2")
        page.locator(".jp-Dialog .jp-mod-accept").click()
        expect(row.locator(".jt-side-size")).to_have_text("2/2 ready", timeout=SERVE_TIMEOUT_MS)

        # The detail panel runs the notebook's ServeView: one row per pod.
        row.click()
        view = page.locator(".jt-detail .jt-serve")
        expect(view.locator(".jt-title")).to_have_text("service side-svc")
        expect(view.locator("table.jt-pods tbody tr.jt-pod")).to_have_count(2, timeout=SERVE_TIMEOUT_MS)
        started = view.locator(".jt-log .jt-line").filter(has_text="serving on 0.0.0.0:8000")
        expect(started.first).to_be_visible(timeout=SERVE_TIMEOUT_MS)

        row.locator(".jt-side-delete").click()
        dialog = page.locator(".jp-Dialog")
        expect(dialog).to_contain_text("Delete service side-svc on serving?")
        dialog.locator(".jp-mod-warn").click()
        expect(side.locator(".jt-side-notice")).not_to_have_text(re.compile("failed"))
        # Deleted: the row either says so or leaves the list.
        alive = side.locator(f'.jt-side-row[data-key="{svc.record.key}"]:not([data-state="DELETED"])')
        expect(alive).to_have_count(0, timeout=SERVE_TIMEOUT_MS)
        # Issue 29 §10: a deleted service reads "deleted", not the parser's "no Deployment found".
        expect(side.locator(f'.jt-side-row[data-key="{svc.record.key}"]')).not_to_contain_text("Deployment")
        expect(view).not_to_contain_text("no Deployment found")
        no_page_errors(page)
    finally:
        tier.close()
