"""Big jobs' rank grids in the browser: a row per node with its name, a legend of the colours with
the count of each, the first failure standing out and a click away from its log, at 256 ranks
(the seed article's 32 nodes x 8) and at 1,024 (128 x 8), in the light and the dark theme.

Both run on the embedded local tier (emulated nodes of bash ``sleep``: 1,024 real processes), so
the grid is filled by a real job without reshaping the Slurm test cluster; the failing rank waits
until every rank has started, so fail-stop stops all the others. A held job on the Slurm test
cluster shows the rows before the ranks start. Screenshots: test-output/widget-{256,1024}{,-dark}.png
(with JT_UPDATE_DOCS_SCREENSHOT=1 the light ones also replace docs/widget-{256,1024}.png).
"""

from __future__ import annotations

import os
import re
import shutil
from typing import Any

import pytest
from playwright.sync_api import expect

from jupyter_tiers.slurm.tier import SlurmTier
from tests.cluster.test_history import ssh

from .conftest import JOB_TIMEOUT_MS, OUTPUT, ROOT, Lab
from .test_job_widget import job_id_of, no_page_errors, open_notebook, run_cell, use_theme, write_notebook

pytestmark = [pytest.mark.browser]  # the Slurm test among them is marked by its fixtures
SHARED_LAB = True  # its Slurm test shares one JupyterLab with the other widget modules (conftest.lab)

PHASES = {"w": "waiting", "r": "running", "x": "exited", "f": "failed", "s": "stopped"}


def run_failing_job(page: Any, lab: Lab, nodes: int, failing: int, name: str) -> tuple[Any, Any]:
    """A local job of ``nodes`` x 8 ranks where rank ``failing`` exits 7 once every rank has
    started (each leaves a file in ``up/`` of the job's working directory, which all its ranks
    share; waiting at most 120 s), so fail-stop stops all the others; returns (cell, widget) once
    the widget shows it FAILED."""
    notebook = write_notebook(
        lab,
        f"ui-{name}.ipynb",
        "%load_ext jupyter_tiers",
        f"""
        %%slurm_train --profile local --shell --nodes {nodes} --ntasks-per-node 8 --name {name}
        mkdir -p up && touch up/$RANK
        if [ "$RANK" = {failing} ]; then  # once every rank is up
          for _ in $(seq 600); do [ "$(ls up | wc -l)" -ge {nodes * 8} ] && break; sleep 0.2; done
          echo "rank {failing}: NCCL timeout (simulated)" >&2; exit 7
        fi
        sleep 300
        """,
    )
    cells = open_notebook(page, lab, notebook)
    run_cell(page, cells, 0)
    cell = run_cell(page, cells, 1)
    widget = cell.locator(".jt-job")
    expect(widget.locator(".jt-grid .jt-rank")).to_have_count(nodes * 8, timeout=JOB_TIMEOUT_MS)
    expect(widget.locator(".jt-state")).to_have_text("FAILED", timeout=JOB_TIMEOUT_MS)
    return cell, widget


def check_node_rows(widget: Any, nodes: int) -> None:
    """One row per node, named local0..local{nodes-1}, each holding its 8 ranks in order."""
    rows = widget.locator(".jt-grid .jt-node")
    expect(rows).to_have_count(nodes)
    shape = rows.evaluate_all(
        "rows => rows.map(r => [r.querySelector('.jt-node-name').textContent,"
        " [...r.querySelectorAll('.jt-rank')].map(c => Number(c.dataset.rank))])"
    )
    assert [name for name, _ in shape] == [f"local{k}" for k in range(nodes)]
    assert all(members == list(range(8 * k, 8 * k + 8)) for k, (_, members) in enumerate(shape)), shape[:3]


def check_legend(widget: Any, failing: int, node: str) -> dict[str, int]:
    """The legend names every colour, its counts match the cells, and the first failure is there."""
    counts = {}
    for code, name in PHASES.items():
        item = widget.locator(f'.jt-legend-item[data-phase="{code}"]')
        expect(item).to_contain_text(name)
        counts[code] = int(item.locator(".jt-legend-count").text_content() or "-1")
        assert counts[code] == widget.locator(f'.jt-grid .jt-rank[data-phase="{code}"]').count(), code
        swatch = item.locator(".jt-swatch").evaluate("el => getComputedStyle(el).backgroundColor")
        if counts[code]:  # the swatch is the cells' colour
            cell = widget.locator(f'.jt-rank[data-phase="{code}"]').first
            assert swatch == cell.evaluate("el => getComputedStyle(el).backgroundColor"), code
    assert counts["f"] == 1
    expect(widget.locator(".jt-first-failure-btn")).to_have_text(
        f"first failure: rank {failing} on {node} (exit 7)")
    return counts


def check_readable(widget: Any, cell: Any) -> None:
    """Every cell a square of at least 8 px, no horizontal overflow, the grid inside the output."""
    sizes = widget.locator(".jt-grid .jt-rank").evaluate_all(
        "cells => cells.map(c => c.getBoundingClientRect()).reduce((m, r) =>"
        " [Math.min(m[0], r.width), Math.min(m[1], r.height)], [1e9, 1e9])"
    )
    assert sizes[0] >= 8 and sizes[1] >= 8, sizes
    overflow = widget.evaluate(
        "el => [el.scrollWidth - el.clientWidth, el.querySelector('.jt-grid').scrollWidth"
        " - el.querySelector('.jt-grid').clientWidth]"
    )
    assert overflow == [0, 0], overflow
    grid_box = widget.locator(".jt-grid").bounding_box()
    cell_box = cell.bounding_box()
    assert grid_box is not None and cell_box is not None
    assert grid_box["x"] >= cell_box["x"]
    assert grid_box["x"] + grid_box["width"] <= cell_box["x"] + cell_box["width"]
    names = widget.locator(".jt-node-name").evaluate_all(
        "els => els.filter(e => e.scrollWidth > e.clientWidth).map(e => e.textContent)")
    assert names == [], f"node names cut off: {names}"


def check_failure_filters_the_log(widget: Any, failing: int) -> None:
    """The first failure stands out (outlined), and its button and its cell filter the log."""
    failed = widget.locator('.jt-grid .jt-rank[data-phase="f"]')
    expect(failed).to_have_attribute("data-rank", str(failing))
    expect(failed).to_have_class(re.compile(r"\bjt-first-failure\b"))
    outline = failed.evaluate("el => getComputedStyle(el).outlineStyle")
    assert outline == "solid"
    widget.locator(".jt-first-failure-btn").click()
    expect(widget.locator(".jt-rank-filter")).to_have_value(str(failing))
    expect(failed).to_have_class(re.compile(r"\bjt-selected\b"))
    expect(failed).to_be_in_viewport()
    expect(widget.locator(".jt-log")).to_contain_text("NCCL timeout (simulated)")
    prefixes = set(widget.locator(".jt-log .jt-prefix").all_text_contents())
    assert prefixes == {f"{failing}: "}, prefixes
    failed.click()  # again: all ranks
    expect(widget.locator(".jt-rank-filter")).to_have_value("-1")
    failed.click()
    expect(widget.locator(".jt-rank-filter")).to_have_value(str(failing))


def screenshots(page: Any, cell: Any, widget: Any, name: str) -> None:
    """Light and dark screenshots; the legend and the cells take the theme's colours."""
    OUTPUT.mkdir(exist_ok=True)
    page.mouse.move(0, 0)  # no hovered rank in the tip line
    cell.screenshot(path=str(OUTPUT / f"{name}.png"))
    if os.environ.get("JT_UPDATE_DOCS_SCREENSHOT"):  # refresh the README's pictures on purpose only
        shutil.copyfile(OUTPUT / f"{name}.png", ROOT / "docs" / f"{name}.png")
    swatch = widget.locator('.jt-legend-item[data-phase="f"] .jt-swatch')
    light = swatch.evaluate("el => getComputedStyle(el).backgroundColor")
    light_text = widget.locator(".jt-node-name").first.evaluate("el => getComputedStyle(el).color")
    use_theme(page, "JupyterLab Dark")
    try:
        expect(widget.locator(".jt-node-name").first).not_to_have_css("color", light_text)
        assert swatch.evaluate("el => getComputedStyle(el).backgroundColor") != light
        cell.screenshot(path=str(OUTPUT / f"{name}-dark.png"))
    finally:
        use_theme(page, "JupyterLab Light")


def test_256_rank_grid_is_readable_and_marks_the_first_failure(page: Any, local_lab: Lab) -> None:
    cell, widget = run_failing_job(page, local_lab, 32, 137, "seed-256")
    check_node_rows(widget, 32)
    counts = check_legend(widget, 137, "local17")
    assert counts == {"w": 0, "r": 0, "x": 0, "f": 1, "s": 255}
    expect(widget.locator(".jt-tip")).to_have_text("256 ranks: 1 failed, 255 stopped")
    expect(widget.locator(".jt-summary")).to_contain_text(
        re.compile(r"first failure: rank 137 \(local17\) exit 7; 255 ranks stopped")
    )
    check_readable(widget, cell)
    failed = widget.locator('.jt-rank[data-phase="f"]')
    failed.hover()
    expect(widget.locator(".jt-tip")).to_contain_text("rank 137 · local17 · failed (exit 7)")
    widget.locator(".jt-title").hover()
    check_failure_filters_the_log(widget, 137)
    failed.click()  # back to all ranks for the screenshots
    screenshots(page, cell, widget, "widget-256")
    no_page_errors(page)


def test_1024_rank_grid_stays_readable(page: Any, local_lab: Lab) -> None:
    cell, widget = run_failing_job(page, local_lab, 128, 777, "big-1024")
    check_node_rows(widget, 128)
    counts = check_legend(widget, 777, "local97")
    assert counts == {"w": 0, "r": 0, "x": 0, "f": 1, "s": 1023}
    check_readable(widget, cell)
    # The grid scrolls inside itself at most: the whole widget stays within a screenful or so.
    grid_box = widget.locator(".jt-grid").bounding_box()
    assert grid_box is not None and grid_box["height"] <= 440, grid_box
    check_failure_filters_the_log(widget, 777)
    failed = widget.locator('.jt-rank[data-phase="f"]')
    failed.click()
    widget.locator(".jt-grid").evaluate("el => { el.scrollTop = 0; }")
    screenshots(page, cell, widget, "widget-1024")
    no_page_errors(page)


def test_rows_come_from_the_shape_while_pending_then_from_the_nodes(
    page: Any, lab: Lab, box_tier: SlurmTier, cluster_env: dict[str, str]
) -> None:
    """On the Slurm test cluster: a held job (PENDING, no nodes yet) shows 2 unnamed rows of 2
    waiting ranks; released, the rows take the nodes' names from the rank files."""
    name = write_notebook(
        lab,
        "ui-held.ipynb",
        "%load_ext jupyter_tiers",
        """
        %%slurm_train --profile box --shell --nodes 2 --ntasks-per-node 2 --name ui-held --sbatch "--hold"
        sleep 300
        """,
    )
    cells = open_notebook(page, lab, name)
    run_cell(page, cells, 0)
    cell = run_cell(page, cells, 1)
    widget = cell.locator(".jt-job")
    job_id = job_id_of(widget)
    try:
        expect(widget.locator(".jt-state")).to_have_text("PENDING", timeout=JOB_TIMEOUT_MS)
        rows = widget.locator(".jt-grid .jt-node")
        expect(rows.locator(".jt-node-name")).to_have_text(["#1", "#2"])
        expect(rows.nth(0).locator(".jt-rank")).to_have_count(2)
        expect(rows.nth(1).locator(".jt-rank")).to_have_count(2)
        expect(widget.locator('.jt-legend-item[data-phase="w"] .jt-legend-count')).to_have_text("4")
        expect(widget.locator(".jt-first-failure-btn")).to_be_hidden()

        ssh(cluster_env, f"scontrol release {job_id}")
        expect(widget.locator('.jt-legend-item[data-phase="r"] .jt-legend-count')).to_have_text(
            "4", timeout=JOB_TIMEOUT_MS)
        expect(rows.locator(".jt-node-name")).to_have_text([re.compile(r"^node\d+$")] * 2)
        shape = rows.evaluate_all(
            "rows => rows.map(r => [...r.querySelectorAll('.jt-rank')].map(c => Number(c.dataset.rank)))")
        assert shape == [[0, 1], [2, 3]], shape
        assert len(set(rows.locator(".jt-node-name").all_text_contents())) == 2  # two nodes
    finally:
        box_tier.cancel(box_tier.attach(job_id).record)
    expect(widget.locator(".jt-state")).to_have_text("CANCELLED", timeout=JOB_TIMEOUT_MS)
    no_page_errors(page)


def test_a_node_with_many_ranks_wraps_its_row(page: Any, local_lab: Lab) -> None:
    """40 ranks on one node: one named row whose cells wrap at 16 a line (16, 16, 8)."""
    name = write_notebook(
        local_lab,
        "ui-wide-node.ipynb",
        "%load_ext jupyter_tiers",
        """
        %%slurm_train --profile local --shell --nodes 1 --ntasks-per-node 40 --name wide-node
        sleep 1
        """,
    )
    cells = open_notebook(page, local_lab, name)
    run_cell(page, cells, 0)
    cell = run_cell(page, cells, 1)
    widget = cell.locator(".jt-job")
    expect(widget.locator(".jt-state")).to_have_text("COMPLETED", timeout=JOB_TIMEOUT_MS)
    rows = widget.locator(".jt-grid .jt-node")
    expect(rows).to_have_count(1)
    expect(rows.locator(".jt-node-name")).to_have_text("local0")
    expect(widget.locator('.jt-legend-item[data-phase="x"] .jt-legend-count')).to_have_text("40")
    tops = rows.locator(".jt-rank").evaluate_all("cells => cells.map(c => c.getBoundingClientRect().top)")
    lines = [tops.count(top) for top in sorted(set(tops))]
    assert lines == [16, 16, 8], lines
    check_readable(widget, cell)
    no_page_errors(page)
