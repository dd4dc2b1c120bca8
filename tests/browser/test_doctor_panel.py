"""Issue 21 section 1: the sidebar's "Check" per profile, in a real JupyterLab in headless
chromium: the sidebar's Check (also the palette's "Tiers: Check Profiles (doctor)") opens a panel
listing the profiles; Check
on the Slurm test cluster's ``box`` profile runs ``POST profiles/box/doctor`` and shows one line per
check, all OK. This Lab loads the labextension built in this checkout ($JUPYTER_PATH first), not
the one the venv links to."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.cluster.conftest import profile_yaml

from .conftest import JOB_TIMEOUT_MS, Lab, _require_browser_tools, _running_lab
from .test_job_widget import open_notebook, write_notebook

pytestmark = [pytest.mark.cluster, pytest.mark.browser]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def doctor_lab(cluster_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    _require_browser_tools()
    build = ROOT / "jupyter_tiers" / "labextension"
    if not (build / "package.json").exists():
        pytest.fail(f"{build} is not built: cd labextension && jlpm build")
    base = tmp_path_factory.mktemp("doctor-lab")
    extensions = base / "jupyter-path" / "labextensions"
    extensions.mkdir(parents=True)
    (extensions / "jupyter-tiers").symlink_to(build)
    saved = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(base / "jupyter-path")  # the Lab's environment is ours
    try:
        with _running_lab(base, profile_yaml(cluster_env)) as server:
            yield server
    finally:
        if saved is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = saved


def test_check_a_profile_from_the_panel(page: Any, doctor_lab: Lab) -> None:
    name = write_notebook(doctor_lab, "ui-doctor.ipynb", "1")
    open_notebook(page, doctor_lab, name)
    page.locator(".lm-MenuBar-itemLabel", has_text="View").click()
    page.locator(".lm-Menu-itemLabel", has_text="Activate Command Palette").click()
    palette = page.locator(".lm-CommandPalette-input")
    expect(palette).to_be_visible()
    palette.fill("Tiers: Show Sidebar")
    page.locator(".lm-CommandPalette-item").filter(has_text="Tiers: Show Sidebar").first.click()
    page.locator(".jt-side .jt-side-doctor").click()  # the sidebar's Check
    panel = page.locator(".jt-doctor-panel")
    box = panel.locator('.jt-doctor-profile[data-profile="box"]')
    expect(box).to_be_visible()
    expect(panel.locator('.jt-doctor-profile[data-profile="local"]')).to_be_visible()
    box.locator(".jt-doctor-check").click()
    result = box.locator(".jt-doctor-result")
    expect(result).to_have_attribute("data-state", "ok", timeout=JOB_TIMEOUT_MS)
    lines = result.locator(".jt-doctor-line")
    expect(lines.filter(has_text=re.compile(r"^OK\s+host key: known"))).to_have_count(1)
    expect(lines.last).to_have_text("all good")
    statuses = [lines.nth(i).get_attribute("data-status") for i in range(lines.count())]
    assert len(statuses) == 13 and set(statuses) == {"OK"}, statuses


def open_doctor_panel(page: Any, lab: Lab) -> Any:
    name = write_notebook(lab, "ui-doctor-all.ipynb", "1")
    open_notebook(page, lab, name)
    page.locator(".lm-MenuBar-itemLabel", has_text="View").click()
    page.locator(".lm-Menu-itemLabel", has_text="Activate Command Palette").click()
    palette = page.locator(".lm-CommandPalette-input")
    expect(palette).to_be_visible()
    palette.fill("Tiers: Check Profiles")
    page.locator(".lm-CommandPalette-item").filter(has_text="Tiers: Check Profiles").first.click()
    panel = page.locator(".jt-doctor-panel")
    expect(panel.locator('.jt-doctor-profile[data-profile="box"]')).to_be_visible()
    return panel


# Every id in the page that more than one element has.
DUPLICATE_IDS = """() => {
  const seen = new Map();
  for (const el of document.querySelectorAll('[id]')) seen.set(el.id, (seen.get(el.id) || 0) + 1);
  return [...seen].filter(([, n]) => n > 1).map(([id, n]) => `${id} x${n}`);
}"""


def test_check_all_buttons_words_and_ids(page: Any, doctor_lab: Lab) -> None:
    """Issue 29 §12: Check all checks every profile and sums up; the buttons look pressable
    (full opacity, a pointer, a background of their own); a profile on this machine promises no
    login; no two elements of the page share an id (the panel and its content once did)."""
    panel = open_doctor_panel(page, doctor_lab)
    assert page.evaluate(DUPLICATE_IDS) == []
    check_all = panel.locator(".jt-doctor-all")
    expect(check_all).to_have_text("Check all")
    expect(check_all).to_be_enabled()
    for button in (check_all, panel.locator(".jt-doctor-check").first):
        look = button.evaluate("""el => { const s = getComputedStyle(el);
            return {opacity: s.opacity, cursor: s.cursor, background: s.backgroundColor}; }""")
        assert look["opacity"] == "1" and look["cursor"] == "pointer", look
        assert look["background"] not in ("rgba(0, 0, 0, 0)", "transparent"), look
    local = panel.locator('.jt-doctor-profile[data-profile="local"] .jt-doctor-check')
    assert "no login" not in (panel.locator('.jt-doctor-profile[data-profile="box"] .jt-doctor-check')
                              .get_attribute("title") or "")
    title = local.get_attribute("title") or ""
    assert "this machine" in title and "login" not in title, title

    check_all.click()
    rows = panel.locator(".jt-doctor-profile")
    count = rows.count()
    summary = panel.locator(".jt-doctor-summary")
    expect(summary).to_have_text(re.compile(rf"^{count} profiles checked: "), timeout=JOB_TIMEOUT_MS)
    for i in range(count):
        state = rows.nth(i).locator(".jt-doctor-result").get_attribute("data-state")
        assert state in ("ok", "failed", "error"), (rows.nth(i).get_attribute("data-profile"), state)
    expect(panel.locator('.jt-doctor-profile[data-profile="box"] .jt-doctor-result')).to_have_attribute(
        "data-state", "ok")
    expect(check_all).to_be_enabled()
    assert page.evaluate(DUPLICATE_IDS) == []
