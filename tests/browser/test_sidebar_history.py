"""The Tiers sidebar's History tab in a real JupyterLab in headless chromium, on the Slurm test
cluster's accounting through the real server extension: a job submitted with plain sbatch over SSH
(marked "other", its markup-laden name and output shown as text) beside one of ours ("ours"), the
state filter, and Attach: the read-only panel of the foreign job (its state and the end of its
output) and the live detail panel of ours. Every wait is bounded; nothing asserts how fast."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from jupyter_tiers.core.model import JobState
from jupyter_tiers.slurm.tier import SlurmTier
from tests.cluster.test_history import _wait_accounted, ssh

from .conftest import JOB_TIMEOUT_MS, OUTPUT, Lab
from .test_sidebar import no_page_errors, open_lab, submit, tiers_lab  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.browser, pytest.mark.cluster]

HOSTILE = "<img src=x onerror=alert(1)>"


@pytest.fixture
def foreign_job(cluster_env: dict[str, str]) -> Iterator[tuple[str, str]]:
    """A two-node job submitted with plain sbatch (default output file) whose name and output
    carry markup, failing with exit 3. Returns (job id, its working directory)."""
    workdir = f"/var/lib/jupyter-tiers-jobs/history-ui-{uuid.uuid4().hex[:8]}"
    script = (
        "#!/bin/bash\n"
        "#SBATCH -J <b>hist-foreign</b> -N 2 -t 5 -p debug\n"
        'echo "hello from plain sbatch"\n'
        f"echo '{HOSTILE}'\n"
        "srun -N 2 --ntasks-per-node=1 true\n"
        "exit 3\n"
    )
    out = ssh(cluster_env, f"(umask 067 && mkdir -p {workdir}) && cd {workdir} && "
                           f"cat > job.sh <<'EOF'\n{script}EOF\nsbatch --parsable job.sh")
    job_id = out.strip().split(";")[0]
    assert job_id.isdigit(), out
    yield job_id, workdir
    ssh(cluster_env, f"scancel {job_id}; rm -rf {workdir}")


def wait_listed(lab: Lab, ids: set[str]) -> None:
    """Until ``GET history`` lists ``ids`` (slurmdbd puts a job that has just ended into a
    time-window query a second or two after ``sacct -j`` knows it): a bound, not an assertion."""
    deadline = time.monotonic() + 180
    while True:
        rows = lab.api("/jupyter-tiers/api/history?profile=box&days=1&limit=200")["rows"]
        if ids <= {r["job_id"] for r in rows}:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"GET history never listed {sorted(ids)}")
        time.sleep(1)


def test_history_tab_lists_ours_and_a_plain_sbatch_job_and_attaches_both(
    page: Any, tiers_lab: Lab, box_tier: SlurmTier, foreign_job: tuple[str, str]  # noqa: F811
) -> None:
    foreign_id, workdir = foreign_job
    ours = submit(box_tier, "hist-side", "print('ours here', flush=True)", nodes=1)
    assert ours.wait(timeout=180).state is JobState.COMPLETED
    _wait_accounted(box_tier, foreign_id)
    _wait_accounted(box_tier, ours.id)
    wait_listed(tiers_lab, {foreign_id, ours.id})

    side = open_lab(page, tiers_lab)
    side.locator('.jt-side-tab[data-tab="history"]').click()
    hist = side.locator(".jt-hist")
    expect(hist).to_be_visible()
    expect(side.locator(".jt-side-list")).to_be_hidden()  # one view at a time
    expect(hist.locator(".jt-hist-profile")).to_have_value("box")
    hist.locator(".jt-hist-days").select_option("1")

    theirs = hist.locator(f'.jt-hist-row[data-job="{foreign_id}"]')
    mine = hist.locator(f'.jt-hist-row[data-job="{ours.id}"]')
    expect(theirs).to_be_visible(timeout=JOB_TIMEOUT_MS)
    expect(theirs.locator(".jt-side-badge")).to_have_text("FAILED")
    expect(theirs.locator(".jt-side-badge")).to_have_attribute("data-class", "bad")
    expect(theirs.locator(".jt-hist-name")).to_have_text(f"{foreign_id} · <b>hist-foreign</b>")
    expect(theirs.locator(".jt-hist-name b")).to_have_count(0)  # the name is text, not markup
    expect(theirs.locator(".jt-hist-origin")).to_have_text("other")
    expect(theirs.locator(".jt-hist-exit")).to_have_text("exit 3")
    expect(theirs.locator(".jt-hist-nodes")).to_have_text(re.compile(r"^2 node"))
    expect(theirs.locator(".jt-hist-rss")).to_have_text(re.compile(r"^max RSS (\d+(\.\d)?[BKMG]|-)$"))
    expect(theirs.locator(".jt-hist-elapsed")).to_have_text(re.compile(r"^\d\d:\d\d:\d\d$"))
    expect(mine.locator(".jt-hist-origin")).to_have_text("ours")
    expect(mine.locator(".jt-side-badge")).to_have_text("COMPLETED")
    expect(mine.locator(".jt-hist-name")).to_have_text(f"{ours.id} · hist-side")

    # The state filter asks the server again: only failed jobs.
    hist.locator(".jt-hist-state").select_option("FAILED")
    expect(mine).to_have_count(0)
    expect(theirs).to_be_visible()
    expect(hist.locator('.jt-hist-row:not([data-state="FAILED"])')).to_have_count(0)
    hist.locator(".jt-hist-state").select_option("")
    expect(mine).to_be_visible()

    # Attach on the foreign job: a read-only panel with its state and the end of its output.
    theirs.locator(".jt-hist-attach").click()
    panel = page.locator(".jt-hist-detail")
    expect(panel).to_be_visible()
    expect(panel.locator(".jt-hist-detail-state")).to_have_text("FAILED")
    expect(panel.locator('dd[data-fact="Exit code"]')).to_have_text("3")
    expect(panel.locator('dd[data-fact="Name"]')).to_have_text("<b>hist-foreign</b>")
    expect(panel.locator(".jt-hist-log-note")).to_have_text(
        f"Last 200 lines of {workdir}/slurm-{foreign_id}.out (read-only)")
    log = panel.locator(".jt-hist-log")
    expect(log).to_contain_text("hello from plain sbatch")
    expect(log).to_contain_text(HOSTILE)  # shown, not run: no dialog (checked below), no <img>
    expect(panel.locator("img, b")).to_have_count(0)
    expect(panel.locator("button")).to_have_count(0)  # read-only: nothing acts on the job
    OUTPUT.mkdir(exist_ok=True)
    page.screenshot(path=str(OUTPUT / "sidebar-history-readonly.png"))
    # Its toolbar's Refresh reads the row and the output again.
    with page.expect_request(lambda r: "/jupyter-tiers/api/history?" in r.url
                             and f"job={foreign_id}" in r.url):
        page.locator(".jt-hist-detail-panel .jt-hist-detail-refresh").filter(visible=True).first.click()
    expect(log).to_contain_text("hello from plain sbatch")

    # Attach on ours: the live detail panel (the notebook widget's view).
    mine.locator(".jt-hist-attach").click()
    view = page.locator(".jt-detail .jt-job")
    expect(view.locator(".jt-title")).to_have_text(f"job {ours.id} · hist-side")
    expect(view.locator(".jt-state")).to_have_text("COMPLETED")
    expect(view.locator(".jt-log .jt-line").filter(has_text="ours here")).to_have_count(
        1, timeout=JOB_TIMEOUT_MS)

    # Back to Jobs: the live list again.
    side.locator('.jt-side-tab[data-tab="jobs"]').click()
    expect(hist).to_be_hidden()
    expect(side.locator(f'.jt-side-row[data-key="{ours.record.key}"]')).to_be_visible()
    side.locator('.jt-side-tab[data-tab="history"]').click()
    expect(theirs).to_be_visible()
    # The sidebar's Refresh asks the history again too while it is on screen (filters kept).
    with page.expect_request(lambda r: "/jupyter-tiers/api/history?" in r.url and "days=1" in r.url):
        side.locator(".jt-side-refresh").click()
    expect(theirs).to_be_visible()
    page.screenshot(path=str(OUTPUT / "sidebar-history.png"))
    no_page_errors(page)
