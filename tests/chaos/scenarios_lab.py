"""Jupyter-server scenario: the server restarted under two open "Tiers" sidebars (issue 18, item 4).

A real JupyterLab (tests/browser/conftest.py's ``LabProcess``) with a local profile, two tabs of
headless chromium with the sidebar open on local-tier jobs. Each round submits a running job and
one that waits for a gate file, stops the server from outside a seeded moment later (SIGTERM: a
clean stop; SIGKILL: no goodbye on any socket), opens the gate while nobody serves the sidebar,
waits for the tier itself to say that job ended, then starts a new server on the same port with
the same token and root dir.

Invariants, in each tab: while the server is down the sidebar says it is reconnecting and keeps
its rows; it reconnects exactly once per restart (``data-connections`` counts its successful
connections, before and after the round's other checks); every job's row is there once (lost:
missing, duplicated: twice); the job that ended meanwhile shows COMPLETED; live again: a job
submitted after the restart shows, and a cancel made in one tab shows CANCELLED in both. At the
end the server has exactly one events listener per tab, and the pages raised no error of ours.
A job's Cancel button stays the same element while other jobs' updates arrive (a row drawn again
on every update replaced it under the mouse: found by this scenario, a click lost).
Recovery: from the new server answering to both tabs connected again (their back-off, with
jitter, included).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect

from jupyter_tiers.core.model import JobState
from jupyter_tiers.engine.handles import Job
from jupyter_tiers.local.tier import LocalTier
from tests.browser.conftest import SERVER_START_S, Lab, LabProcess
from tests.chaos import schedules
from tests.chaos.harness import Outcome, wait_until

SIDEBAR_ID = "jupyter-tiers-sidebar"
JOB_S = 180.0
JOB_MS = int(JOB_S * 1000)
UI_MS = 60_000
# The sidebar waits at most 30 s between tries; the server's start comes on top.
RECONNECT_MS = (SERVER_START_S + 60) * 1000


def submit(tier: LocalTier, name: str, body: str) -> Job:
    return tier.submit(tier.make_spec(body, shell=True, nodes=1, name=name))


def tier_state(tier: LocalTier, job: Job, state: JobState, timeout: float = JOB_S) -> bool:
    """Wait until the tier itself (not the server) says ``job`` is in ``state``."""
    return wait_until(lambda: tier.status([job.record])[job.id].state is state, timeout, 0.3) is not None


class Tab:
    """One browser tab with the sidebar open, and its uncaught errors (message and stack)."""

    def __init__(self, page: Any, lab: Lab, number: int) -> None:
        self.page = page
        self.number = number
        self.errors: list[tuple[str, str]] = []
        page.on("pageerror", lambda exc: self.errors.append((str(exc), exc.stack or "")))
        page.goto(f"{lab.url}/lab?reset&token={lab.token}")
        page.locator(f'.jp-SideBar [data-id="{SIDEBAR_ID}"]').click()
        self.side = page.locator(f"#{SIDEBAR_ID}")
        expect(self.side).to_be_visible(timeout=UI_MS)
        self.status = self.side.locator(".jt-side-status")

    def badge(self, job: Job) -> Any:
        return self.side.locator(f'.jt-side-row[data-key="{job.record.key}"] .jt-side-badge')

    def row_keys(self) -> list[str]:
        keys: list[str] = self.side.evaluate(
            "el => [...el.querySelectorAll('.jt-side-row')].map(r => r.dataset.key)")
        return keys

    def errors_of_ours(self) -> list[str]:
        """Uncaught errors but JupyterLab core's own failed fetches while the server was down."""
        return [msg for msg, stack in self.errors if not jupyterlab_core_fetch(stack)]


def jupyterlab_core_fetch(stack: str) -> bool:
    """A failed request that JupyterLab's own core bundle left uncaught (its status polls and
    workspace saves while the server was down): every frame in ``/static/lab/jlab_core.*``."""
    frames = [line.strip() for line in stack.splitlines()[1:] if line.strip().startswith("at ")]
    return (stack.startswith("TypeError: Failed to fetch") and bool(frames)
            and all("/static/lab/jlab_core." in f for f in frames))


def _see(outcome: Outcome, tab: Tab, what: str, check: Callable[..., None], *args: Any,
         **kwargs: Any) -> bool:
    """Run one bounded Playwright wait, ``check(*args, **kwargs)``; a miss is one wrong state,
    said in words."""
    try:
        check(*args, **kwargs)
        return True
    except AssertionError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "timed out"
        outcome.wrong(f"tab {tab.number}: {what} ({first})")
        return False


def _rows_once(outcome: Outcome, tab: Tab, jobs: Sequence[Job], when: str) -> None:
    """Every job's row once (after a bounded wait for the missing ones), and nothing else."""
    want = {j.record.key for j in jobs}
    wait_until(lambda: want <= set(tab.row_keys()), UI_MS / 1000, 0.2)
    keys = tab.row_keys()
    outcome.checked += len(want)
    missing = want - set(keys)
    twice = len(keys) - len(set(keys))
    stray = set(keys) - want
    if missing:
        outcome.lost += len(missing)
        outcome.problems.append(f"tab {tab.number} {when}: no row for {sorted(missing)}")
    if twice:
        outcome.duplicated += twice
        outcome.problems.append(f"tab {tab.number} {when}: rows twice: {sorted(keys)}")
    if stray:
        outcome.wrong(f"tab {tab.number} {when}: rows of no job of ours: {sorted(stray)}")


def lab_restarts(lab: LabProcess, tier: LocalTier, pages: Sequence[Any], gates: Path, *, seed: int,
                 restarts: int, signals: Sequence[signal.Signals] = (signal.SIGTERM, signal.SIGKILL),
                 progress: Callable[[str], None] | None = None) -> Outcome:
    """``restarts`` rounds (see the module docstring) with the sidebar open in each of ``pages``
    (two tabs of one browser); round ``i`` stops the server with ``signals[i % len(signals)]``.
    ``tier`` submits into the server's registry; gate files go under ``gates``."""
    names = "/".join(s.name for s in dict.fromkeys(signals))
    outcome = Outcome(f"jupyter: server restarted ({names}) under 2 sidebar tabs")
    plan = schedules.lab_restarts(seed, restarts, tuple(s.name for s in signals))
    say = progress or (lambda _text: None)
    ended = submit(tier, "rs-ended", "echo ended")
    if not tier_state(tier, ended, JobState.COMPLETED):
        outcome.wrong(f"job {ended.id} did not complete before any fault")
        return outcome
    jobs = [ended]
    tabs = [Tab(page, lab.server, n) for n, page in enumerate(pages)]
    for tab in tabs:
        _see(outcome, tab, f"job {ended.id} COMPLETED", expect(tab.badge(ended)).to_have_text,
             "COMPLETED", timeout=JOB_MS)
        _see(outcome, tab, "connected once", expect(tab.status).to_have_attribute,
             "data-connections", "1", timeout=UI_MS)

    for i, fault in enumerate(plan):
        sig = signal.Signals[fault.kind]
        gate = gates / f"gate-{i}"
        running = submit(tier, f"rs-running-{i}", "echo up; sleep 600")
        finishing = submit(tier, f"rs-finishing-{i}", f"while [ ! -e {gate} ]; do sleep 0.2; done; echo done")
        jobs += [running, finishing]
        for tab in tabs:
            for job in (running, finishing):
                _see(outcome, tab, f"job {job.id} RUNNING before the fault",
                     expect(tab.badge(job)).to_have_text, "RUNNING", timeout=JOB_MS)
        time.sleep(fault.at)

        lab.signal(sig)
        outcome.faults += 1
        say(f"restart {i + 1}/{restarts}: server stopped by {sig.name}")
        for tab in tabs:  # while it is down each tab says so, and keeps its rows
            _see(outcome, tab, "says it is reconnecting while the server is down",
                 expect(tab.status).to_contain_text, "reconnecting (attempt", timeout=UI_MS)
            _rows_once(outcome, tab, jobs, "while the server is down")
        gate.touch()  # a job ends while nobody serves the sidebar
        if not tier_state(tier, finishing, JobState.COMPLETED):
            outcome.wrong(f"job {finishing.id} did not complete with its gate open")

        lab.start()
        answered = time.monotonic()
        for tab in tabs:
            _see(outcome, tab, "connected again", expect(tab.status).to_have_attribute,
                 "data-connected", "1", timeout=RECONNECT_MS)
        outcome.recover_s.append(time.monotonic() - answered)
        for tab in tabs:
            _see(outcome, tab, f"{i + 2} connections after {i + 1} restarts",
                 expect(tab.status).to_have_attribute, "data-connections", str(i + 2))
            _see(outcome, tab, "status empty once connected",
                 expect(tab.status).to_have_text, "")
            # Nothing lost: the job that ended meanwhile shows its final state.
            _see(outcome, tab, f"job {finishing.id} COMPLETED (ended while the server was down)",
                 expect(tab.badge(finishing)).to_have_text, "COMPLETED", timeout=JOB_MS)
            _rows_once(outcome, tab, jobs, "after the restart")

        # Live again: a job submitted now shows in both tabs, and so does a cancel made in one.
        # Its updates must leave the running job's row as it was: its Cancel button the same
        # element (a row drawn again on every update replaced it under the mouse: a lost click).
        buttons = [t.side.locator(f'.jt-side-row[data-key="{running.record.key}"] .jt-side-cancel')
                   for t in tabs]
        for button in buttons:
            button.evaluate("b => { b.jtSame = true; }")
        after = submit(tier, f"rs-after-{i}", "echo after")
        jobs.append(after)
        for tab, button in zip(tabs, buttons, strict=True):
            _see(outcome, tab, f"job {after.id} (submitted after the restart) COMPLETED",
                 expect(tab.badge(after)).to_have_text, "COMPLETED", timeout=JOB_MS)
            if not button.evaluate("b => b.jtSame === true"):
                outcome.wrong(f"tab {tab.number}: job {after.id}'s updates replaced the Cancel button "
                              f"of job {running.id}")
        actor = tabs[i % len(tabs)]
        _dismiss_dialogs(actor)
        cancel = actor.side.locator(f'.jt-side-row[data-key="{running.record.key}"] .jt-side-cancel')
        try:
            cancel.click(timeout=UI_MS)
        except PlaywrightError as exc:
            outcome.wrong(f"tab {actor.number}: cannot click Cancel of job {running.id}: "
                          f"{str(exc).splitlines()[0]}")
        actor.page.locator(".jp-Dialog .jp-mod-warn").click()
        for tab in tabs:
            _see(outcome, tab, f"job {running.id} CANCELLED (from tab {actor.number})",
                 expect(tab.badge(running)).to_have_text, "CANCELLED", timeout=JOB_MS)
        if not tier_state(tier, running, JobState.CANCELLED):
            outcome.wrong(f"job {running.id} is not CANCELLED on the tier after the sidebar's cancel")
        # Still one reconnect per restart after all of that: no second socket, no row twice.
        for tab in tabs:
            _see(outcome, tab, f"still {i + 2} connections at the end of round {i + 1}",
                 expect(tab.status).to_have_attribute, "data-connections", str(i + 2))
            _rows_once(outcome, tab, jobs, f"at the end of round {i + 1}")
        say(f"restart {i + 1}/{restarts}: both tabs back in {outcome.recover_s[-1]:.1f} s")

    listeners = lab.server.api("/jupyter-tiers/api/stats")["listeners"]
    if listeners != len(tabs):
        outcome.wrong(f"the server has {listeners} events listeners for {len(tabs)} tabs")
    for tab in tabs:
        for msg in tab.errors_of_ours():
            outcome.wrong(f"tab {tab.number}: uncaught error in the page: {msg}")
    return outcome


def _dismiss_dialogs(tab: Tab) -> None:
    """JupyterLab's own "Server Connection Error" dialog, if its polls met the dead server: a
    user closes it (it is JupyterLab's, not the sidebar's)."""
    dialog = tab.page.locator(".jp-Dialog")
    while dialog.count():
        tab.page.keyboard.press("Escape")
        expect(dialog).to_have_count(0, timeout=UI_MS)
