"""The rank grid by use and the straggler in the header, in a real JupyterLab (issue 28 items 1
and 2): a local 2 x 2 job where rank 1 holds 200 MiB and rank 2 sleeps on every step. The header
names rank 2 and its node; "colour by use" shades the running ranks (the sleeper paler than the
busy ones); rank 1's tooltip shows its RSS and a node's name its ranks' totals. Shorter
straggler thresholds and a beat a second are set in the kernel (the tier is the cached one the
magic uses). Screenshot: test-output/usage-grid.png. No timed assertions."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import JOB_TIMEOUT_MS, OUTPUT, Lab
from .test_job_widget import no_page_errors, open_notebook, run_cell, write_notebook

pytestmark = [pytest.mark.browser]
SHARED_LAB = True


def test_grid_by_use_and_the_straggler_named(page: Any, lab: Lab) -> None:
    notebook = write_notebook(
        lab,
        "ui-usage.ipynb",
        "%load_ext jupyter_tiers",
        """
        import os
        os.environ["JT_HEARTBEAT"] = "1"  # the local tier's ranks keep it from the kernel's environment
        from jupyter_tiers.api import connect
        from jupyter_tiers.batch.straggler import StragglerRule
        connect("local").watcher.straggler_rule = StragglerRule(window=10, hold=5, warmup=5, floor=0.005)
        """,
        """
        %%slurm_train --profile local --nodes 2 --ntasks-per-node 2 --name usage-grid
        import os, time
        rank = int(os.environ["RANK"])
        block = bytearray(200 * 1024 * 1024) if rank == 1 else None
        if block is not None:
            for i in range(0, len(block), 4096):
                block[i] = 1
        end = time.time() + 240
        while time.time() < end and not os.path.exists(os.path.join(os.environ["JT_JOB_DIR"], "stop")):
            if rank == 2:
                time.sleep(0.3)
            else:
                sum(range(20000))
        """,
    )
    cells = open_notebook(page, lab, notebook)
    run_cell(page, cells, 0)
    run_cell(page, cells, 1)
    cell = run_cell(page, cells, 2)
    widget = cell.locator(".jt-job")
    expect(widget.locator(".jt-straggler")).to_contain_text(
        re.compile(r"straggler: rank 2 \(local1\) "), timeout=JOB_TIMEOUT_MS)

    toggle = widget.locator(".jt-use-toggle")
    expect(toggle).to_have_attribute("aria-pressed", "false")
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "true")
    expect(widget.locator(".jt-grid")).to_have_class(re.compile(r"\bjt-by-use\b"))

    fat = widget.locator('.jt-rank[data-rank="1"]')
    expect(fat).to_have_attribute("title", re.compile(r"RSS \d+ MiB"), timeout=JOB_TIMEOUT_MS)
    rss = int(re.search(r"RSS (\d+) MiB", fat.get_attribute("title") or "").group(1))  # type: ignore[union-attr]
    assert rss > 150
    fat.hover()
    tip = re.compile(r"rank 1 · local0 · running · CPU \d+ % · RSS")
    expect(widget.locator(".jt-tip")).to_contain_text(tip)
    node_name = widget.locator('.jt-node[data-node="local1"] .jt-node-name')
    totals = re.compile(r"local1: CPU \d+ % · RSS .* \(its ranks together\)")
    expect(node_name).to_have_attribute("title", totals)

    # the sleeper is shaded paler than a busy rank (its --jt-use is lower)
    def use(rank: int) -> int:
        return int(widget.locator(f'.jt-rank[data-rank="{rank}"]').get_attribute("data-use") or "-1")

    assert 0 <= use(2) < max(use(0), use(3)), [use(r) for r in range(4)]
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
