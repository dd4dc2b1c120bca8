"""Issue 29 §10 in a real JupyterLab (headless chromium) on real Slurm jobs of the test cluster:
the Tiers sidebar at its default width cuts and wraps nothing that matters — states, sizes and
counts, ages, buttons (measured in the page: ``scrollWidth <= clientWidth`` and one line box) —
names carry their full text as a tooltip, a failed job's row says its failure reason and how long
it ran, the age column ticks for a waiting job as for a running one, and the History tab's Attach
buttons keep their full width. Every wait is bounded by a Playwright timeout; nothing asserts how
fast anything was."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from jupyter_tiers.config.registry import JobRecord, Registry
from jupyter_tiers.core.detail import with_entries
from jupyter_tiers.core.model import JobState
from jupyter_tiers.engine.handles import Job
from jupyter_tiers.slurm.tier import SlurmTier
from tests.cluster.test_history import _wait_accounted

from .conftest import JOB_TIMEOUT_MS, OUTPUT, UI_TIMEOUT_MS, Lab
from .test_sidebar import no_page_errors, open_lab, row_of, submit, tiers_lab  # noqa: F401
from .test_sidebar_history import wait_listed

pytestmark = [pytest.mark.browser, pytest.mark.cluster]

LONG_NAME = "readable-a-rather-long-experiment-name-lr3e-4-warmup"

# Elements (inside `root`) that show something the user needs whole: each must fit its box
# (scrollWidth <= clientWidth) on one line (its text makes one line box). Returns the ones that
# do not, with their measures, for the assertion message.
CUT = """([root, selector]) => {
  const out = [];
  for (const el of root.querySelectorAll(selector)) {
    if (!el.offsetParent || !el.textContent) continue;  // hidden or empty
    const range = document.createRange();
    range.selectNodeContents(el);
    const lines = new Set([...range.getClientRects()].map(r => Math.round(r.top))).size;
    if (el.scrollWidth > el.clientWidth || lines > 1) {
      out.push(`${el.className} "${el.textContent}": scroll ${el.scrollWidth}, client ${el.clientWidth}, `
               + `${lines} lines`);
    }
  }
  return out;
}"""

WHOLE = ".jt-side-badge, .jt-side-size, .jt-side-profile, .jt-side-elapsed, button"

# A History row's Attach: inside its row (not pushed out at the right), and on the meta line
# (it starts above the exit code's bottom: not wrapped onto a line of its own).
ATTACH_INSIDE = """row => { const a = row.querySelector('.jt-hist-attach').getBoundingClientRect();
  const r = row.getBoundingClientRect(); return a.left >= r.left && a.right <= r.right; }"""
ATTACH_ON_META = """row => row.querySelector('.jt-hist-attach').getBoundingClientRect().top
  < row.querySelector('.jt-hist-exit').getBoundingClientRect().bottom"""


def cut_in(locator: Any, selector: str = WHOLE) -> list[str]:
    return locator.evaluate(f"(root) => ({CUT})([root, {selector!r}])")


@pytest.fixture
def big_record(tiers_lab: Lab) -> Iterator[JobRecord]:  # noqa: F811
    """A job of the size researchers run (64 ranks on 16 GPU nodes, a day and more) that ended
    out of memory: a record in the lab's registry, final, so nothing asks the cluster about it;
    the sidebar draws it through the real server like any other. Its texts are the long ones a
    test job on the two-node test cluster never has."""
    registry = Registry(tiers_lab.registry)  # the lab server's
    rec = JobRecord(profile="box", tier="slurm", job_id="990001", name=LONG_NAME, state="OUT_OF_MEMORY",
                    world_size=64, spec={"nodes": 16}, nodelist="gpu-a100-node[001-016]",
                    submitted_at=time.time() - 100_000,
                    detail=with_entries(None, ended={"reason": "first failure: rank 37 "
                                                     "(gpu-a100-node012) killed by SIGKILL",
                                                     "elapsed_s": 93784}))
    registry.add(rec)
    yield rec
    registry.remove(rec.key)


@pytest.fixture
def three_jobs(tiers_lab: Lab, box_tier: SlurmTier) -> Iterator[tuple[Job, Job, Job]]:  # noqa: F811
    failed = submit(box_tier, LONG_NAME, """
        import os, sys
        print("rank", os.environ["RANK"], flush=True)
        sys.exit(3 if os.environ["RANK"] == "1" else 0)
        """)
    running = submit(box_tier, "readable-run", "import time\ntime.sleep(600)\n", nodes=1)
    held = box_tier.submit(box_tier.make_spec("print(1)\n", name="readable-held", sbatch_options=("--hold",)))
    yield failed, running, held
    running.cancel()
    held.cancel()


def test_rows_at_the_default_width_cut_nothing_that_matters(
    page: Any, tiers_lab: Lab, three_jobs: tuple[Job, Job, Job], big_record: JobRecord  # noqa: F811
) -> None:
    failed, running, held = three_jobs
    assert failed.wait(timeout=300).state is JobState.FAILED, failed.logs()
    side = open_lab(page, tiers_lab)
    width = side.evaluate("el => el.clientWidth")

    # A failed job: its failure reason, how long it ran (final), the full name as a tooltip.
    row = row_of(side, failed)
    expect(row.locator(".jt-side-badge")).to_have_text("FAILED", timeout=JOB_TIMEOUT_MS)
    expect(row.locator(".jt-side-reason")).to_have_text(
        re.compile(r"^first failure: rank 1 \(\S+\) exit 3$"), timeout=UI_TIMEOUT_MS)
    expect(row.locator(".jt-side-elapsed")).to_have_text(re.compile(r"^\d\d:\d\d:\d\d$"))
    expect(row.locator(".jt-side-elapsed")).to_have_attribute("data-age", "final")
    name = row.locator(".jt-side-name")
    expect(name).to_have_attribute("title", f"{failed.id} · {LONG_NAME}")

    # A held job waits: its age is its time in the queue, and it ticks.
    waiting = row_of(side, held)
    expect(waiting.locator(".jt-side-badge")).to_have_text("PENDING", timeout=JOB_TIMEOUT_MS)
    age = waiting.locator(".jt-side-elapsed")
    expect(age).to_have_attribute("data-age", "waiting")
    expect(age).to_have_text(re.compile(r"^\d\d:\d\d:\d\d$"))
    expect(age).not_to_have_text(age.text_content() or "", timeout=UI_TIMEOUT_MS)

    # A running job's age ticks; its Cancel button is whole.
    live = row_of(side, running)
    expect(live.locator(".jt-side-badge")).to_have_text("RUNNING", timeout=JOB_TIMEOUT_MS)
    ticking = live.locator(".jt-side-elapsed")
    expect(ticking).not_to_have_text(ticking.text_content() or "", timeout=UI_TIMEOUT_MS)
    expect(live.locator(".jt-side-cancel")).to_be_visible()

    # The big job's long texts: the size and state whole, the node list cut with a tooltip.
    big = side.locator(f'.jt-side-row[data-key="{big_record.key}"]')
    expect(big.locator(".jt-side-badge")).to_have_text("OUT_OF_MEMORY")
    expect(big.locator(".jt-side-size")).to_have_text("64 ranks on 16 nodes")
    expect(big.locator(".jt-side-elapsed")).to_have_text("1-02:03:04")
    expect(big.locator(".jt-side-reason")).to_have_text(
        "first failure: rank 37 (gpu-a100-node012) killed by SIGKILL")
    expect(big.locator(".jt-side-where")).to_have_attribute("title", "gpu-a100-node[001-016]")

    for each in (row, waiting, live, big):
        assert cut_in(each) == [], f"at the sidebar's default width ({width} px)"
    assert cut_in(side.locator(".jt-side-head")) == [], f"head at {width} px"
    # The long name is cut with an ellipsis only (its tooltip has it): the row does not grow.
    assert name.evaluate("el => el.scrollWidth > el.clientWidth"), "the long name should need the tooltip"
    OUTPUT.mkdir(exist_ok=True)
    side.screenshot(path=str(OUTPUT / "sidebar-default-width.png"))  # for the docs and a look
    no_page_errors(page)


def test_history_attach_buttons_are_whole(page: Any, tiers_lab: Lab, box_tier: SlurmTier) -> None:  # noqa: F811
    job = submit(box_tier, LONG_NAME, "print('done', flush=True)\n", nodes=1)
    assert job.wait(timeout=300).state is JobState.COMPLETED, job.logs()
    _wait_accounted(box_tier, job.id)
    wait_listed(tiers_lab, {job.id})
    side = open_lab(page, tiers_lab)
    side.locator('.jt-side-tab[data-tab="history"]').click()
    hist = side.locator(".jt-hist")
    hist.locator(".jt-hist-days").select_option("1")
    row = hist.locator(f'.jt-hist-row[data-job="{job.id}"]')
    expect(row).to_be_visible(timeout=JOB_TIMEOUT_MS)
    attach = row.locator(".jt-hist-attach")
    expect(attach).to_have_text("Attach")
    width = side.evaluate("el => el.clientWidth")
    assert cut_in(row, ".jt-side-badge, .jt-hist-attach, .jt-hist-exit, .jt-hist-origin") == [], f"{width} px"
    # Not squashed nor pushed out: as wide as its label needs, inside its row, on the meta line.
    assert attach.evaluate("el => el.getBoundingClientRect().width >= el.scrollWidth")
    assert row.evaluate(ATTACH_INSIDE), f"Attach sticks out of its row at {width} px"
    # Every row of the list, whatever its node list and max RSS (the test cluster's accounting).
    rows = hist.locator(".jt-hist-row")
    for i in range(min(rows.count(), 20)):
        other = rows.nth(i)
        assert cut_in(other, ".jt-side-badge, .jt-hist-attach, .jt-hist-exit, .jt-hist-origin") == []
        assert other.evaluate(ATTACH_INSIDE), f"Attach sticks out of its row at {width} px"
        assert other.evaluate(ATTACH_ON_META), "Attach went to a line of its own"
    OUTPUT.mkdir(exist_ok=True)
    side.screenshot(path=str(OUTPUT / "sidebar-history-default-width.png"))
    no_page_errors(page)
