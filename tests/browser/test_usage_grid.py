"""The rank grid by use and the straggler in the header, in a real JupyterLab, on the Slurm test
cluster (issue 28 items 1 and 2, its Done-when): a 4-node x 2-rank job where rank 5 holds
200 MiB and rank 3 sleeps on every step. The header names rank 3 and its node; "colour by use"
shades the running ranks (the sleeper paler than the busy ones); rank 5's tooltip shows its RSS
and a node's name its ranks' totals. The job runs under the shared lab's ``boxbeat`` profile (a
rank beat a second); shorter straggler thresholds are set in the kernel on the tier the magic
uses. Screenshot: test-output/usage-grid.png. No timed assertions."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import BEAT_PROFILE, JOB_TIMEOUT_MS, OUTPUT, Lab
from .test_job_widget import no_page_errors, open_notebook, run_cell, write_notebook

pytestmark = [pytest.mark.browser]
SHARED_LAB = True
SLOW, EATER = 3, 5


@pytest.mark.timeout(1200)  # the job may queue for minutes behind the other lanes' jobs
def test_grid_by_use_and_the_straggler_named(page: Any, lab: Lab) -> None:
    notebook = write_notebook(
        lab,
        "ui-usage.ipynb",
        "%load_ext jupyter_tiers",
        f"""
        from jupyter_tiers.api import connect
        from jupyter_tiers.batch.straggler import StragglerRule
        connect("{BEAT_PROFILE}").watcher.straggler_rule = StragglerRule(window=10, hold=5, warmup=5,
                                                                         floor=0.005)
        """,
        f"""
        %%slurm_train --profile {BEAT_PROFILE} --nodes 4 --ntasks-per-node 2 --name usage-grid
        import os, time
        rank = int(os.environ["RANK"])
        block = bytearray(200 * 1024 * 1024) if rank == {EATER} else None
        if block is not None:
            for i in range(0, len(block), 4096):
                block[i] = 1
        end = time.time() + 900  # cancelled by the test; the bound is for a test that died
        while time.time() < end and not os.path.exists(os.path.join(os.environ["JT_JOB_DIR"], "stop")):
            sum(range(100000))  # a step's work; a pause after it keeps 8 ranks off a busy machine's cores
            time.sleep(0.3 if rank == {SLOW} else 0.025)
        """,
    )
    cells = open_notebook(page, lab, notebook)
    run_cell(page, cells, 0)
    run_cell(page, cells, 1)
    cell = run_cell(page, cells, 2)
    widget = cell.locator(".jt-job")
    # A job on all four nodes waits for the other lanes' jobs to leave them: minutes, not seconds.
    expect(widget.locator(".jt-state")).to_contain_text("RUNNING", timeout=420_000)
    straggler = widget.locator(".jt-straggler")
    expect(straggler).to_contain_text(re.compile(rf"straggler: rank {SLOW} \(\S+\) "),
                                      timeout=JOB_TIMEOUT_MS)
    slow_node = re.search(rf"rank {SLOW} \((\S+)\)", straggler.inner_text()).group(1)  # type: ignore[union-attr]
    expect(widget.locator(".jt-rank")).to_have_count(8)

    toggle = widget.locator(".jt-use-toggle")
    expect(toggle).to_have_attribute("aria-pressed", "false")
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "true")
    expect(widget.locator(".jt-grid")).to_have_class(re.compile(r"\bjt-by-use\b"))

    # the eater's RSS stands out (every other rank is a small Python)
    def rss(rank: int) -> int:
        cell = widget.locator(f'.jt-rank[data-rank="{rank}"]')
        expect(cell).to_have_attribute("title", re.compile(r"RSS \d+ MiB"), timeout=JOB_TIMEOUT_MS)
        return int(re.search(r"RSS (\d+) MiB", cell.get_attribute("title") or "").group(1))  # type: ignore[union-attr]

    sizes = {r: rss(r) for r in range(8)}
    assert sizes[EATER] > 150 and all(sizes[EATER] > 2 * v for r, v in sizes.items() if r != EATER), sizes
    fat = widget.locator(f'.jt-rank[data-rank="{EATER}"]')
    fat.hover()
    tip = re.compile(rf"rank {EATER} · \S+ · running · CPU \d+ % · RSS")
    expect(widget.locator(".jt-tip")).to_contain_text(tip)
    node_name = widget.locator(f'.jt-node[data-node="{slow_node}"] .jt-node-name')
    totals = re.compile(rf"{re.escape(slow_node)}: CPU \d+ % · RSS .* \(its ranks together\)")
    expect(node_name).to_have_attribute("title", totals)

    # the sleeper is shaded paler than the busy ranks (its --jt-use is lower)
    def use(rank: int) -> int:
        return int(widget.locator(f'.jt-rank[data-rank="{rank}"]').get_attribute("data-use") or "-1")

    uses = [use(r) for r in range(8)]
    assert 0 <= uses[SLOW] < max(u for r, u in enumerate(uses) if r != SLOW), uses
    colours = widget.locator(".jt-rank").evaluate_all(
        "cells => cells.map(c => getComputedStyle(c).backgroundColor)")
    assert len(set(colours)) > 1, colours  # shaded, not one phase colour
    OUTPUT.mkdir(parents=True, exist_ok=True)
    cell.screenshot(path=str(OUTPUT / "usage-grid.png"))
    cancel = widget.locator(".jt-cancel")
    cancel.click()
    cancel.click()  # "Really cancel job ...?"
    expect(widget.locator(".jt-state")).to_have_text("CANCELLED", timeout=JOB_TIMEOUT_MS)
    no_page_errors(page)
