"""The charts' pure mapping (jupyter_tiers/faces/widgets/chart_data.js), run by node: series ->
uPlot's aligned columns and options, the legend's current and hovered values, the theme from
JupyterLab's CSS variables, the Load panel's rows -> its charts without the second still being
counted."""

from __future__ import annotations

import json
import random
from typing import Any

from tests.unit.widget_js import run_module

IMPORTS = ('import { jtAlign, jtChartNum, jtChartOptions, jtChartText, jtChartTheme, jtLegendValues, '
           'jtLoadData, jtRange, JT_LOAD_CHARTS } from "./chart_data.js";\n')


def js(body: str) -> Any:
    return run_module(IMPORTS + body, "chart data JS tests")


def test_numbers_are_short_and_never_nan() -> None:
    out = js("console.log(JSON.stringify([0, 3, 0.0003, 1.035, 10.05, 1234.5678, 0.123456, 2.5e7, 1e-6, "
             "-42.25, null, NaN, Infinity].map(jtChartNum)));")
    assert out == ["0", "3", "0.0003", "1.035", "10.05", "1235", "0.123", "2.50e7", "1.00e-6", "-42.25",
                   "–", "–", "–"]


def test_align_takes_the_union_of_x_and_leaves_gaps_null() -> None:
    out = js("console.log(JSON.stringify(jtAlign("
             "[[[1, 2], [3, 1], [2, null]], [[2, 5], [4, NaN], [0, 1], 'x']])));")
    assert out == [[0, 1, 2, 3, 4], [None, 2, None, 1, None], [1, None, 5, None, None]]


def test_legend_shows_current_values_then_the_hovered_point() -> None:
    data = [[1, 2, 3, 4], [0.5, 0.4, None, None], [7, 8, 9, None]]
    out = js(f"const d = {json.dumps(data)};\n"
             "console.log(JSON.stringify([jtLegendValues(d, null), jtLegendValues(d, 1), "
             "jtLegendValues(d, 9), jtLegendValues([[], []], null)]));")
    # not hovering: each series' last value; x is the last x where any series has one
    assert out[0] == {"x": 3, "values": [0.4, 9], "hovered": False}
    assert out[1] == {"x": 2, "values": [0.4, 8], "hovered": True}
    assert out[2]["hovered"] is False  # an index past the data is no hover
    assert out[3] == {"x": None, "values": [None], "hovered": False}


def test_ranges_keep_lines_off_the_frame() -> None:
    out = js("console.log(JSON.stringify([jtRange(0, 10, true), jtRange(2, 4, false), jtRange(5, 5, true), "
             "jtRange(0, 0, true), jtRange(-3, -3, false), jtRange(null, null, true), "
             "jtRange(-1, 1, true)]));")
    assert out[0] == [0, 11]
    assert out[1][0] < 2 and out[1][1] > 4
    assert out[2] == [0, 5.5] and out[3] == [0, 1]
    assert out[4][0] < -3 < out[4][1]
    assert out[5] == [0, 1]
    assert out[6][0] < -1 and out[6][1] > 1


def test_options_have_labelled_axes_gridlines_and_themed_lines() -> None:
    out = js("""
const theme = jtChartTheme((name) => ({"--jp-brand-color1": "#123456", "--jp-border-color2": "rgb(1, 2, 3)",
                                       "--jp-ui-font-family": "Roboto, sans-serif"})[name] || "");
const o = jtChartOptions(JT_LOAD_CHARTS.traffic, theme, 500.7, 120);
console.log(JSON.stringify({
  size: [o.width, o.height], legend: o.legend.show,
  axes: o.axes.map((a) => [a.scale, a.label, a.side, a.grid.show, a.grid.stroke, a.font]),
  ticks: o.axes[1].values(null, [0, 0.5, 1500]),
  series: o.series.slice(1).map((s) => [s.label, s.scale, s.stroke, s.dash || null]),
  scales: Object.keys(o.scales), time: o.scales.x.time, yRange: o.scales.y.range(null, 0, 10),
  small: [jtChartOptions(JT_LOAD_CHARTS.latency, theme, 10, 10).width],
  sizes: [o.axes[0].size, o.axes[1].size(null, ["0", "1.00e-6"]), o.axes[1].size(null, null)],
}));""")
    assert out["size"] == [500, 120]
    assert out["legend"] is False  # the chart's own legend (uplot_chart.js) shows current values
    assert out["axes"] == [
        ["x", "s since start", 2, True, "rgb(1, 2, 3)", "11px Roboto, sans-serif"],
        ["y", "answers/s", 3, True, "rgb(1, 2, 3)", "11px Roboto, sans-serif"],
        ["y2", "replicas", 1, False, "rgb(1, 2, 3)", "11px Roboto, sans-serif"],
    ]
    assert out["ticks"] == ["0", "0.5", "1500"]
    assert out["series"] == [["throughput", "y", "#123456", None], ["ready", "y2", "#388e3c", [4, 2]]]
    assert out["scales"] == ["x", "y", "y2"] and out["time"] is False
    assert out["yRange"] == [0, 11]
    assert out["small"] == [120]  # never narrower than its axes need
    assert out["sizes"] == [24, 61, 33]  # a y axis as wide as its longest tick value


def test_theme_falls_back_and_refuses_what_is_not_a_colour() -> None:
    out = js("""console.log(JSON.stringify(jtChartTheme((n) => ({"--jp-brand-color1": "url(http://x)",
    "--jp-error-color1": " #f00 ", "--jp-ui-font-family": "a;b{}",
    "--jp-warn-color1": "hsla(1, 2%, 3%, 0.5)"})[n])));""")
    assert out["brand"] == "#1976d2"  # not a colour: the fallback
    assert out["error"] == "#f00"
    assert out["font"] == "system-ui, sans-serif"
    assert out["warn"] == "hsla(1, 2%, 3%, 0.5)"


def test_load_rows_leave_out_the_second_still_being_counted() -> None:
    rows = [{"t": 1, "throughput_rps": 50, "dropped": 0, "late": 0, "errors": 0, "p50_ms": 5, "p95_ms": 9,
             "p99_ms": 12, "ready": 2},
            {"t": 0, "throughput_rps": 49, "dropped": 1, "late": 0, "errors": 0, "p50_ms": 4, "p95_ms": 8,
             "p99_ms": 11, "ready": 2},
            {"t": 2, "throughput_rps": 17, "dropped": 0, "late": 0, "errors": 0, "p50_ms": 5, "p95_ms": 9,
             "p99_ms": None, "ready": 2}]
    out = js(f"const rows = {json.dumps(rows)};\n"
             "console.log(JSON.stringify([jtLoadData(rows, true), jtLoadData(rows, false), "
             "jtLoadData([], true)]));")
    running, done, empty = out
    # running: second 2 is a third counted (17/s would read as a drop): not drawn yet
    assert running["unfinished"] == 2
    assert running["traffic"] == [[0.5, 1.5], [49, 50], [2, 2]]
    assert running["failures"] == [[0.5, 1.5], [1, 0], [0, 0], [0, 0]]
    # over: every second is final
    assert done["unfinished"] is None
    assert done["latency"] == [[0.5, 1.5, 2.5], [4, 5, 5], [8, 9, 9], [11, 12, None]]
    assert empty["unfinished"] is None and empty["latency"] == [[], [], [], []]


def test_chart_text_says_the_values_in_words() -> None:
    out = js("console.log(JSON.stringify(["
             "jtChartText(JT_LOAD_CHARTS.latency, [[0.5, 1.5], [4, 5], [8, 9], [11, null]]),"
             " jtChartText(JT_LOAD_CHARTS.latency, [[], [], [], []])]));")
    assert out == ["latency at s since start 1.5: p50 5, p95 9, p99 11", "latency: no values yet"]


def test_fuzz_mapping_never_throws_and_keeps_columns_aligned() -> None:
    """Random series (odd values included): jtAlign's columns are as long as x, x is sorted and
    unique; the legend's values are numbers or null; jtLoadData never draws the running second."""
    rng = random.Random(20261206)
    odd: list[Any] = [None, "x", [], {}, True, -1, 0, 1.5, 1e308, -1e-300]
    cases = []
    for _ in range(200):
        series = []
        for _ in range(rng.randint(0, 4)):
            pts: list[Any] = []
            for _ in range(rng.randint(0, 12)):
                if rng.random() < 0.1:
                    pts.append(rng.choice(odd))
                else:
                    pts.append([rng.choice([rng.randint(0, 9), rng.random() * 10, None]),
                                rng.choice([rng.uniform(-5, 5), None, rng.randint(0, 3)])])
            series.append(pts)
        rows = [{"t": rng.choice([rng.randint(0, 6), None, "2"]),
                 "throughput_rps": rng.choice([1, None, "a"]), "ready": rng.choice([0, 1, None])}
                for _ in range(rng.randint(0, 8))]
        cases.append({"series": series, "rows": rows, "idx": rng.choice([None, 0, 1, 5, -1, 2.5]),
                      "running": rng.random() < 0.5})
    out = js(f"const cases = {json.dumps(cases)};\n" + """
console.log(JSON.stringify(cases.map((c) => {
  const d = jtAlign(c.series);
  const l = jtLegendValues(d, c.idx);
  const load = jtLoadData(c.rows, c.running);
  return { d, l, load };
})));""")
    for case, got in zip(cases, out, strict=True):
        d = got["d"]
        assert len(d) == len(case["series"]) + 1
        assert d[0] == sorted(set(d[0])) and all(len(col) == len(d[0]) for col in d)
        assert all(v is None or isinstance(v, (int, float)) for v in got["l"]["values"])
        load = got["load"]
        finite = sorted(r["t"] for r in case["rows"] if isinstance(r["t"], int))
        drawn = [x - 0.5 for x in load["traffic"][0]]
        if case["running"] and finite:
            assert load["unfinished"] == finite[-1] and drawn == finite[:-1]
        else:
            assert load["unfinished"] is None and drawn == finite
