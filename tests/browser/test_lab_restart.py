"""The Jupyter server restarted under two open "Tiers" sidebars (issue 18, item 4).

A real JupyterLab of its own (it is stopped and started again, so never the session's shared one)
with a local profile, two tabs of headless chromium with the sidebar open on local-tier jobs. The
fault comes from outside: SIGTERM (a clean stop) or SIGKILL (no goodbye on any socket) to the server
process, then a new server on the same port with the same token and root dir. Each tab must
reconnect exactly once (the sidebar counts its connections in ``data-connections``), show every
row once, show the final state of a job that ended while the server was down, and be live again:
a job submitted afterwards and a cancel made from one tab show in both. Every wait is bounded; no
assertion is on how fast anything was.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from jupyter_tiers.config import load_config
from jupyter_tiers.handles import Job
from jupyter_tiers.local.tier import LocalTier
from jupyter_tiers.model import JobState
from jupyter_tiers.registry import Registry

from .conftest import JOB_TIMEOUT_MS, SERVER_START_S, LabProcess, _lab_process
from .test_sidebar import SIDEBAR_ID, no_page_errors, open_lab, row_of

pytestmark = [pytest.mark.browser]

# The sidebar's back-off is at most 30 s between tries; the server start comes on top.
RECONNECT_MS = (SERVER_START_S + 60) * 1000


@pytest.fixture
def restartable(tmp_path: Path) -> Iterator[LabProcess]:
    """A JupyterLab of this test alone, with one local profile ``laptop``."""
    base = tmp_path / "lab"
    base.mkdir()
    tiers_yaml = f"profiles:\n  laptop:\n    tier: local\n    workdir: {tmp_path / 'work'}\n"
    with _lab_process(base, tiers_yaml) as process:
        yield process


@pytest.fixture
def laptop(restartable: LabProcess, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalTier]:
    """The ``laptop`` tier on the server's registry, as a notebook's kernel would have it."""
    monkeypatch.setenv("JUPYTER_TIERS_CONFIG", str(restartable.server.config))
    tier = LocalTier(load_config().profile("laptop"), Registry(restartable.server.registry))
    try:
        yield tier
    finally:
        for rec in tier.registry.list(limit=100):
            tier.cancel(rec)  # harmless on ended jobs
        tier.close()


def submit(tier: LocalTier, name: str, body: str) -> Job:
    return tier.submit(tier.make_spec(body, shell=True, nodes=1, name=name))


def wait_state(tier: LocalTier, job: Job, state: JobState, timeout: float = JOB_TIMEOUT_MS / 1000) -> None:
    """Wait until the tier itself (not the server) says ``job`` is in ``state``."""
    deadline = time.monotonic() + timeout
    while (seen := tier.status([job.record])[job.id].state) is not state:
        assert time.monotonic() < deadline, f"job {job.id} is {seen.name}, not {state.name}"
        time.sleep(0.5)


def second_tab(page: Any) -> Any:
    """Another tab of the same browser window (same cookies), with the same error traps."""
    tab = page.context.new_page()
    tab.jt_dialogs, tab.jt_errors = [], []
    tab.on("dialog", lambda d: (tab.jt_dialogs.append(d.message), d.dismiss()))
    tab.on("pageerror", lambda exc: tab.jt_errors.append(str(exc)))
    return tab


def keep_stacks(tab: Any) -> list[str]:
    """The stacks of the tab's uncaught errors from now on (the ``page`` fixture keeps messages)."""
    stacks: list[str] = []
    tab.on("pageerror", lambda exc: stacks.append(exc.stack or ""))
    return stacks


def jupyterlab_core_fetch(stack: str) -> bool:
    """A failed request that JupyterLab's own core bundle left uncaught (its status and workspace
    saves while the server was down): every frame in ``/static/lab/jlab_core.*``, none ours."""
    frames = [line.strip() for line in stack.splitlines()[1:] if line.strip().startswith("at ")]
    return (stack.startswith("TypeError: Failed to fetch") and bool(frames)
            and all("/static/lab/jlab_core." in f for f in frames))


def no_errors_of_ours(tab: Any, stacks: list[str]) -> None:
    """``no_page_errors``, once JupyterLab core's own failed fetches are set aside."""
    assert len(stacks) == len(tab.jt_errors), (stacks, tab.jt_errors)
    tab.jt_errors[:] = [e for e, st in zip(tab.jt_errors, stacks, strict=True)
                        if not jupyterlab_core_fetch(st)]
    no_page_errors(tab)


def status_of(side: Any) -> Any:
    return side.locator(".jt-side-status")


def badge(side: Any, job: Job) -> Any:
    return row_of(side, job).locator(".jt-side-badge")


def row_keys(side: Any) -> list[str]:
    return side.evaluate("el => [...el.querySelectorAll('.jt-side-row')].map(r => r.dataset.key)")


def expect_rows_once(side: Any, jobs: list[Job]) -> None:
    """Exactly one row per job, and nothing else."""
    expect(side.locator(".jt-side-row")).to_have_count(len(jobs))
    keys = row_keys(side)
    assert sorted(keys) == sorted(j.record.key for j in jobs), keys


def dismiss_connection_dialogs(tab: Any) -> None:
    """JupyterLab's own "Server Connection Error" dialog, if its polls met the dead server:
    a user closes it; it is JupyterLab's, not the sidebar's."""
    dialog = tab.locator(".jp-Dialog")
    while dialog.count():
        tab.keyboard.press("Escape")
        expect(dialog).to_have_count(0)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_two_sidebar_tabs_reconnect_once_after_a_server_restart(
    page: Any, restartable: LabProcess, laptop: LocalTier, tmp_path: Path, sig: int
) -> None:
    lab = restartable.server
    gate = tmp_path / "gate"
    running = submit(laptop, "rs-running", "echo up; sleep 600")
    finishing = submit(laptop, "rs-finishing", f"while [ ! -e {gate} ]; do sleep 0.2; done; echo done")
    ended = submit(laptop, "rs-ended", "echo ended")
    wait_state(laptop, ended, JobState.COMPLETED)
    jobs = [running, finishing, ended]

    tabs = [page, second_tab(page)]
    stacks = [keep_stacks(tab) for tab in tabs]
    sides = [open_lab(tab, lab) for tab in tabs]
    for side in sides:
        expect(badge(side, running)).to_have_text("RUNNING", timeout=JOB_TIMEOUT_MS)
        expect(row_of(side, finishing).locator(".jt-side-badge")).to_have_text("RUNNING")
        expect(row_of(side, ended).locator(".jt-side-badge")).to_have_text("COMPLETED")
        expect(status_of(side)).to_have_attribute("data-connections", "1")
        expect_rows_once(side, jobs)
    assert lab.api("/jupyter-tiers/api/stats")["listeners"] == 2

    restartable.signal(sig)
    # While the server is down each tab says so (and keeps its rows).
    for side in sides:
        expect(status_of(side)).to_have_attribute("data-connected", "")
        expect(status_of(side)).to_contain_text("reconnecting (attempt")
        expect_rows_once(side, jobs)
    gate.touch()  # a job ends while nobody serves the sidebar
    wait_state(laptop, finishing, JobState.COMPLETED)

    restartable.start()
    for side in sides:
        expect(status_of(side)).to_have_attribute("data-connected", "1", timeout=RECONNECT_MS)
        expect(status_of(side)).to_have_attribute("data-connections", "2")
        expect(status_of(side)).to_have_text("")
        # Nothing lost: the job that ended meanwhile shows its final state; no row twice.
        expect(badge(side, finishing)).to_have_text("COMPLETED", timeout=JOB_TIMEOUT_MS)
        expect(row_of(side, running).locator(".jt-side-badge")).to_have_text("RUNNING")
        expect_rows_once(side, jobs)

    # Live again: a job submitted now shows in both tabs, and so does a cancel made in one.
    after = submit(laptop, "rs-after", "echo after")
    jobs.append(after)
    for side in sides:
        expect(badge(side, after)).to_have_text("COMPLETED", timeout=JOB_TIMEOUT_MS)
    for tab in tabs:
        dismiss_connection_dialogs(tab)
    row_of(sides[0], running).locator(".jt-side-cancel").click()
    tabs[0].locator(".jp-Dialog .jp-mod-warn").click()
    for side in sides:
        expect(badge(side, running)).to_have_text("CANCELLED", timeout=JOB_TIMEOUT_MS)
    wait_state(laptop, running, JobState.CANCELLED)

    # Exactly one reconnect per tab, after all of that: no second socket, no duplicate rows.
    for tab, side, stack in zip(tabs, sides, stacks, strict=True):
        expect(status_of(side)).to_have_attribute("data-connections", "2")
        expect_rows_once(side, jobs)
        assert tab.locator(f"#{SIDEBAR_ID}").count() == 1
        no_errors_of_ours(tab, stack)
    assert lab.api("/jupyter-tiers/api/stats")["listeners"] == 2
