"""What a uPlot chart (uplot_chart.js) must show, checked in the page: labelled axes whose tick
values uPlot drew, a legend with each line's current value, a read-out while the pointer is over
the plot, and nothing drawn outside the chart's box."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect


def check_chart(chart: Any, axes: list[str], current: dict[str, str], *, hover: bool = True) -> None:
    """``chart`` is a ``.jt-uchart`` locator; ``axes`` its axis labels (x first); ``current`` the
    legend's value for each series while nothing is hovered."""
    expect(chart).to_be_visible()
    expect(chart.locator("canvas")).to_have_count(1)
    expect(chart).to_have_attribute("data-axes", "|".join(axes))
    for i in range(len(axes)):
        ticks = chart.get_attribute(f"data-ticks{i}") or ""
        assert ticks.strip(), f"axis {i} ({axes[i]}) has no tick values"
    for series, value in current.items():
        expect(chart.locator(f'.jt-uchart-item[data-series="{series}"] .jt-uchart-value')).to_have_text(value)
    # Nothing clipped: the plot fits the chart's box, and the box its container.
    fits = chart.evaluate("""el => {
        const box = el.getBoundingClientRect(), plot = el.querySelector('.uplot').getBoundingClientRect();
        return plot.left >= box.left - 0.5 && plot.right <= box.right + 0.5
            && el.scrollWidth <= el.clientWidth + 1;
    }""")
    assert fits, "the chart is wider than its box"
    if hover:
        over = chart.locator(".u-over")
        size = over.bounding_box()
        assert size and size["width"] > 50
        over.hover(position={"x": size["width"] * 0.5, "y": size["height"] * 0.5})
        expect(chart.locator(".jt-uchart-legend")).to_have_attribute("data-hovered", "1")
        chart.page.mouse.move(0, 0)
        expect(chart.locator(".jt-uchart-legend")).to_have_attribute("data-hovered", "")
