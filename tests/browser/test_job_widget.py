"""The JobView widget in a real JupyterLab in headless chromium, on a real Slurm job.

Each test writes a notebook, opens it in the browser, runs its cells the way a person does (click
into the editor, Shift+Enter) and looks at the DOM the widget rendered. Every wait is bounded by a
Playwright timeout; nothing asserts how fast anything was.
"""

from __future__ import annotations

import os
import re
import shutil
import textwrap
from typing import Any

import nbformat
import pytest
from playwright.sync_api import expect

from jupyter_tiers.core.model import JobState
from jupyter_tiers.slurm.tier import SlurmTier

from .conftest import JOB_TIMEOUT_MS, OUTPUT, ROOT, UI_TIMEOUT_MS, Lab

pytestmark = [pytest.mark.cluster, pytest.mark.browser]
SHARED_LAB = True  # one JupyterLab for this and the other widget modules (conftest.lab)

HOSTILE_IMG = "<img src=x onerror=alert(1)>"
HOSTILE_B = "<b>bold</b>"


def write_notebook(lab: Lab, name: str, *cells: str) -> str:
    nb = nbformat.v4.new_notebook()
    # Without a kernelspec JupyterLab opens a "Select Kernel" dialog that blocks the page.
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(textwrap.dedent(src).strip("\n")) for src in cells]
    nbformat.write(nb, lab.root / name)
    return name


def open_notebook(page: Any, lab: Lab, name: str) -> Any:
    """Open a notebook and wait until its kernel is idle; returns the cells' locator."""
    return open_notebook_at(page, lab.notebook_url(name))


def open_notebook_at(page: Any, url: str) -> Any:
    """:func:`open_notebook` for a notebook's URL (a hub student's server, say)."""
    page.goto(url)
    # anywidget's front end is a prebuilt extension shipped in its wheel: it must be loaded.
    config = page.evaluate("JSON.parse(document.getElementById('jupyter-config-data').textContent)")
    assert "anywidget" in [ext["name"] for ext in config["federated_extensions"]], config
    assert not any(d.startswith("anywidget") for d in config.get("disabledExtensions", [])), config
    panel = page.locator(".jp-NotebookPanel").filter(has=page.locator(".jp-Notebook"))
    expect(panel).to_be_visible()
    # The toolbar's indicator says "idle" before any kernel exists: wait for the status bar to
    # name the connected kernel (a cell run before that is silently dropped).
    kernel_status = page.locator(".jp-StatusBar-TextItem").filter(
        has_text=re.compile(r"^Python 3 \(ipykernel\) \| Idle$")
    )
    expect(kernel_status).to_have_count(1, timeout=UI_TIMEOUT_MS)
    return panel.locator(".jp-Notebook .jp-Cell")


def run_cell(page: Any, cells: Any, index: int) -> Any:
    """Click into cell ``index``'s editor, press Shift+Enter, wait for its execution count."""
    cell = cells.nth(index)
    cell.locator(".cm-content").click()
    page.keyboard.press("Shift+Enter")
    expect(cell.locator(".jp-InputPrompt")).to_have_text(re.compile(r"\[\d+\]"), timeout=JOB_TIMEOUT_MS)
    return cell


def job_id_of(widget: Any) -> str:
    expect(widget.locator(".jt-title")).to_have_text(re.compile(r"^job \d+ · "))
    match = re.match(r"job (\d+) · ", widget.locator(".jt-title").text_content())
    assert match, widget.locator(".jt-title").text_content()
    return match.group(1)


def use_theme(page: Any, name: str) -> None:
    """Switch JupyterLab's theme live from the command palette (opened from the View menu) and
    wait until the page says the theme is applied."""
    page.locator(".lm-MenuBar-itemLabel", has_text="View").click()
    page.locator(".lm-Menu-itemLabel", has_text="Activate Command Palette").click()
    palette = page.locator(".lm-CommandPalette-input")
    expect(palette).to_be_visible()
    palette.fill(f"Use Theme: {name}")
    item = page.locator(".lm-CommandPalette-item").filter(has_text=f"Use Theme: {name}").first
    expect(item).to_be_visible()
    item.click()
    expect(page.locator("body")).to_have_attribute("data-jp-theme-name", name, timeout=UI_TIMEOUT_MS)


def colours_of(widget: Any) -> dict[str, str]:
    """The computed colours of the state badge, a running rank and the log."""
    return {
        "badge": widget.locator(".jt-state").evaluate("el => getComputedStyle(el).backgroundColor"),
        "badge_text": widget.locator(".jt-state").evaluate("el => getComputedStyle(el).color"),
        "rank": widget.locator('.jt-rank[data-phase="r"]').first.evaluate(
            "el => getComputedStyle(el).backgroundColor"),
        "log": widget.locator(".jt-log").evaluate("el => getComputedStyle(el).backgroundColor"),
    }


def confirm(button: Any) -> None:
    """The second, acting click on a button that asks once more ("Really cancel …?"). Its question
    stays up for 5 s of the page's clock, which a loaded machine can spend between two Playwright
    steps (a click then only asks again): this click is made in the page in one go, asking
    again first should the question have gone."""
    expect(button).to_be_enabled()
    button.evaluate("b => { if (b.dataset.confirm !== '1') b.click(); b.click(); }")


def no_page_errors(page: Any) -> None:
    assert page.jt_dialogs == [], f"the page opened dialogs: {page.jt_dialogs}"
    assert page.jt_errors == [], f"uncaught errors in the page: {page.jt_errors}"


def test_live_widget_streams_filters_and_cancels(page: Any, lab: Lab, box_tier: SlurmTier) -> None:
    name = write_notebook(
        lab,
        "ui-test.ipynb",
        "%load_ext jupyter_tiers",
        """
        %%slurm_train --profile box --nodes 2 --ntasks-per-node 2 --name ui-test
        import os, time
        rank = int(os.environ["RANK"])
        for i in range(30):
            print(f"tick {i} from rank {rank}", flush=True)
            time.sleep(0.5)
        time.sleep(600)
        """,
    )
    cells = open_notebook(page, lab, name)
    run_cell(page, cells, 0)
    cell = run_cell(page, cells, 1)
    widget = cell.locator(".jt-job")
    expect(widget).to_be_visible()
    job_id = job_id_of(widget)
    expect(widget.locator(".jt-title")).to_have_text(f"job {job_id} · ui-test")

    # The rank grid: 2 nodes x 2 tasks, and the ranks start.
    ranks = widget.locator(".jt-grid .jt-rank")
    expect(ranks).to_have_count(4, timeout=JOB_TIMEOUT_MS)
    for cell_el in ranks.all():
        expect(cell_el).to_be_visible()
    expect(widget.locator('.jt-rank[data-phase="r"]').first).to_be_visible(timeout=JOB_TIMEOUT_MS)
    expect(widget.locator(".jt-state")).to_have_text("RUNNING", timeout=JOB_TIMEOUT_MS)
    expect(widget.locator(".jt-tip")).to_have_text("4 ranks: 4 running", timeout=JOB_TIMEOUT_MS)

    # Streamed log lines with their rank prefixes, from every rank.
    log = widget.locator(".jt-log")
    for rank in range(4):
        line = log.locator(".jt-line").filter(has_text=f"tick 3 from rank {rank}")
        expect(line).to_have_count(1, timeout=JOB_TIMEOUT_MS)
        expect(line.locator(".jt-prefix")).to_have_text(f"{rank}:")
        expect(line).to_be_visible()

    # Rank filter: a click on rank 2's cell shows rank 2's lines only; a second click shows all.
    widget.locator('.jt-rank[data-rank="2"]').click()
    expect(widget.locator('.jt-rank[data-rank="2"]')).to_have_class(re.compile(r"\bjt-selected\b"))
    expect(widget.locator(".jt-rank-filter")).to_have_value("2")
    expect(widget.locator(".jt-tip")).to_have_text(re.compile(r"^rank 2 · node\d+ · running$"))  # hovered
    page.mouse.move(0, 0)
    expect(widget.locator(".jt-tip")).to_contain_text("showing rank 2 only")
    expect(log.locator(".jt-line").filter(has_text="tick 3 from rank 0")).to_have_count(0)
    expect(log.locator(".jt-line").filter(has_text="tick 3 from rank 2")).to_have_count(1)
    prefixes = log.locator(".jt-prefix").all_text_contents()
    assert prefixes and {p.strip() for p in prefixes} == {"2:"}, prefixes
    assert all("from rank 2" in t for t in log.locator(".jt-text").all_text_contents())
    widget.locator('.jt-rank[data-rank="2"]').click()
    expect(widget.locator(".jt-rank-filter")).to_have_value("-1")
    expect(log.locator(".jt-line").filter(has_text="tick 3 from rank 0")).to_have_count(1)

    # Copy job id puts the id on the clipboard. The button says "Copied" for 1.5 s of the page's
    # clock (a loaded machine can spend that between two polls): its first new label is kept.
    copy = widget.locator(".jt-copy")
    copy.evaluate("b => { window.__jtCopyLabel = null; new MutationObserver((_, o) => {"
                  " o.disconnect(); window.__jtCopyLabel = b.textContent; })"
                  ".observe(b, {childList: true, characterData: true, subtree: true}); }")
    copy.click()
    page.wait_for_function("() => window.__jtCopyLabel !== null")
    assert page.evaluate("window.__jtCopyLabel") == "Copied"
    assert page.evaluate("navigator.clipboard.readText()") == job_id
    expect(widget.locator(".jt-copy")).to_have_text("Copy job id")

    # Show script: the rendered sbatch script, as text.
    widget.locator(".jt-script-toggle").click()
    expect(widget.locator(".jt-script")).to_contain_text("#SBATCH")
    widget.locator(".jt-script-toggle").click()
    expect(widget.locator(".jt-script")).to_be_hidden()

    OUTPUT.mkdir(exist_ok=True)
    expect(log.locator(".jt-line").filter(has_text="tick 8 from rank 3")).to_have_count(1)
    page.mouse.move(0, 0)
    cell.screenshot(path=str(OUTPUT / "widget.png"))
    if os.environ.get("JT_UPDATE_DOCS_SCREENSHOT"):  # refresh the README's picture on purpose only
        shutil.copyfile(OUTPUT / "widget.png", ROOT / "docs" / "widget.png")

    # The dark theme: the badge, the rank grid and the log take the theme's colours
    # (test-output/widget-dark.png), and switching back restores the light ones.
    light = colours_of(widget)
    use_theme(page, "JupyterLab Dark")
    try:
        dark = colours_of(widget)
        assert all(dark[k] != light[k] for k in light), (light, dark)
        page.mouse.move(0, 0)
        cell.screenshot(path=str(OUTPUT / "widget-dark.png"))
    finally:
        use_theme(page, "JupyterLab Light")
    assert colours_of(widget) == light

    # Cancel needs a confirming second click.
    cancel = widget.locator(".jt-cancel")
    cancel.click()
    expect(cancel).to_have_text(f"Really cancel job {job_id}?")
    expect(cancel).to_have_attribute("data-confirm", "1")
    expect(widget.locator(".jt-state")).to_have_text("RUNNING")
    confirm(cancel)
    expect(cancel).to_be_disabled()
    expect(widget.locator(".jt-state")).to_have_text("CANCELLED", timeout=JOB_TIMEOUT_MS)
    expect(widget.locator('.jt-rank[data-phase="s"]')).to_have_count(4)
    expect(widget.locator(".jt-tip")).to_have_text("4 ranks: 4 stopped")
    expect(cancel).to_have_text("Cancel")
    expect(cancel).to_be_disabled()
    expect(widget.locator(".jt-summary")).to_contain_text(f"job {job_id} CANCELLED")

    # The cluster agrees, and so does the registry the kernel wrote.
    assert box_tier.attach(job_id).status().state is JobState.CANCELLED
    assert box_tier.registry.get(job_id).state == "CANCELLED"
    cell.screenshot(path=str(OUTPUT / "widget-cancelled.png"))
    no_page_errors(page)


def test_failing_rank_is_marked_first_failure(page: Any, lab: Lab, box_tier: SlurmTier) -> None:
    name = write_notebook(
        lab,
        "ui-fail.ipynb",
        "%load_ext jupyter_tiers",
        """
        %%slurm_train --profile box --nodes 2 --ntasks-per-node 2 --name ui-fail
        import os, sys, time
        rank = int(os.environ["RANK"])
        print(f"rank {rank} up", flush=True)
        up = os.path.join(os.environ["JT_JOB_DIR"], "up")
        os.makedirs(up, exist_ok=True)
        open(os.path.join(up, str(rank)), "w").close()
        if rank == 3:  # fail once every rank is up, so fail-stop has 3 started ranks to stop
            for _ in range(1200):
                if len(os.listdir(up)) == 4:
                    break
                time.sleep(0.1)
            print("RuntimeError: rank 3 gives up", file=sys.stderr, flush=True)
            sys.exit(3)
        time.sleep(300)
        """,
    )
    cells = open_notebook(page, lab, name)
    run_cell(page, cells, 0)
    cell = run_cell(page, cells, 1)
    widget = cell.locator(".jt-job")
    job_id = job_id_of(widget)

    expect(widget.locator(".jt-state")).to_have_text("FAILED", timeout=JOB_TIMEOUT_MS)
    failed = widget.locator('.jt-rank[data-phase="f"]')
    expect(failed).to_have_count(1)
    expect(failed).to_have_attribute("data-rank", "3")
    expect(failed).to_have_class(re.compile(r"\bjt-first-failure\b"))
    expect(failed).to_have_attribute("title", re.compile(r"rank 3 · .*failed \(exit 3\) · first failure"))
    expect(widget.locator(".jt-summary")).to_contain_text(f"job {job_id} FAILED")
    expect(widget.locator(".jt-summary")).to_contain_text(re.compile(r"first failure: rank 3\b.* exit 3"))
    error_line = widget.locator(".jt-log .jt-line.jt-error")
    expect(error_line.first).to_contain_text("RuntimeError: rank 3 gives up")
    expect(error_line.first.locator(".jt-prefix")).to_have_text("3:")
    expect(widget.locator(".jt-tip")).to_have_text("4 ranks: 1 failed, 3 stopped")
    # The fail-stop's kill reports are one line, one click away; the failure's own report stays.
    fold = widget.locator(".jt-log .jt-fold")
    expect(fold).to_have_count(1, timeout=UI_TIMEOUT_MS)
    expect(fold).to_contain_text(
        re.compile(r"3 ranks stopped by fail-stop after rank 3 \(node\d+\) failed — show$"))
    log_lines = widget.locator(".jt-log .jt-line")
    kills = log_lines.filter(has_text=re.compile(r"Exited with exit code 143$|: Killed$"))
    expect(kills).to_have_count(0)
    expect(log_lines.filter(has_text=re.compile(r": task 3: Exited with exit code 3$"))).to_have_count(1)
    fold.locator(".jt-fold-toggle").click()
    expect(kills.first).to_be_visible()
    expect(fold).to_contain_text("failed — hide")
    fold.locator(".jt-fold-toggle").click()
    expect(kills).to_have_count(0)
    expect(widget.locator(".jt-jump-error")).to_be_enabled()
    widget.locator(".jt-jump-error").click()
    expect(error_line.first).to_have_class(re.compile(r"\bjt-flash\b"))
    OUTPUT.mkdir(exist_ok=True)
    cell.screenshot(path=str(OUTPUT / "widget-failed.png"))
    assert box_tier.attach(job_id).status().state is JobState.FAILED
    no_page_errors(page)


def test_text_from_the_cluster_is_shown_as_text(page: Any, lab: Lab) -> None:
    name = write_notebook(
        lab,
        "ui-xss.ipynb",
        "%load_ext jupyter_tiers",
        f"""
        %%slurm_train --profile box --nodes 1 --ntasks-per-node 1 --name ui-xss --out job
        print({HOSTILE_IMG!r}, flush=True)
        print({HOSTILE_B!r}, flush=True)
        """,
        # A second view of the same job whose name and message are hostile too (a name given on
        # the magic line is validated, so it cannot carry markup; the widget must not rely on it).
        f"""
        from IPython.display import display
        from jupyter_tiers.faces.widgets.job_view import JobView
        view = JobView(job)
        view.wait(120)
        view.job_name = {HOSTILE_IMG!r}
        view.message = {HOSTILE_B + " message"!r}
        display(view)
        """,
    )
    cells = open_notebook(page, lab, name)
    run_cell(page, cells, 0)
    cell = run_cell(page, cells, 1)
    widget = cell.locator(".jt-job")
    expect(widget.locator(".jt-state")).to_have_text("COMPLETED", timeout=JOB_TIMEOUT_MS)
    log = widget.locator(".jt-log")
    expect(log.locator(".jt-text").filter(has_text=HOSTILE_IMG)).to_have_count(1)
    expect(log.locator(".jt-text").filter(has_text=HOSTILE_B)).to_have_count(1)
    widget.locator(".jt-script-toggle").click()
    expect(widget.locator(".jt-script")).to_be_visible()

    second = run_cell(page, cells, 2).locator(".jt-job")
    expect(second.locator(".jt-title")).to_have_text(re.compile(r"· " + re.escape(HOSTILE_IMG) + "$"))
    expect(second.locator(".jt-message")).to_have_text(HOSTILE_B + " message")

    for view in (widget, second):
        expect(view.locator("img")).to_have_count(0)
        expect(view.locator("b")).to_have_count(0)
    assert page.locator(".jp-OutputArea img").count() == 0
    no_page_errors(page)
