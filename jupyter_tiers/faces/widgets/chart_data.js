// Pure: what the charts (uplot_chart.js) draw, as data: series -> uPlot's aligned columns and
// options, the legend's values, the colours from JupyterLab's CSS variables, the Load panel's rows
// -> its three charts. No DOM and no uPlot here, so node tests it as it is (tests/unit).

// A number for an axis tick, a legend or a read-out: short, and never "NaN".
export function jtChartNum(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  const a = Math.abs(v);
  if (a === 0) return "0";
  if (a >= 1e6 || a < 1e-4) return v.toExponential(2).replace("e+", "e");
  if (v === Math.round(v)) return String(v);
  return String(Number(v.toPrecision(a >= 1 ? 4 : 3)));
}

// The CSS variable each colour role reads, and what it falls back to outside JupyterLab.
export const JT_CHART_VARS = {
  text: ["--jp-ui-font-color1", "#222"],
  muted: ["--jp-ui-font-color2", "#666"],
  grid: ["--jp-border-color2", "#e0e0e0"],
  axis: ["--jp-border-color1", "#bdbdbd"],
  font: ["--jp-ui-font-family", "system-ui, sans-serif"],
  brand: ["--jp-brand-color1", "#1976d2"],
  warn: ["--jp-warn-color1", "#f57c00"],
  warnDark: ["--jp-warn-color0", "#a15c00"],
  warnLight: ["--jp-warn-color2", "#c9a000"],
  error: ["--jp-error-color1", "#d32f2f"],
  success: ["--jp-success-color1", "#388e3c"],
  accent: ["--jp-accent-color1", "#7b1fa2"],
  info: ["--jp-info-color1", "#0097a7"],
};

// The colours of the current theme: `read(name)` gives a CSS variable's value ("" when unset,
// as getComputedStyle does). Each value must look like a colour or a font list, so nothing odd
// reaches the canvas.
export function jtChartTheme(read) {
  const theme = {};
  for (const [role, [name, fallback]] of Object.entries(JT_CHART_VARS)) {
    const value = String(read(name) ?? "").trim();
    const ok = role === "font" ? /^[\w\s,"'-]+$/.test(value) : /^(#[0-9a-fA-F]{3,8}|(rgb|hsl)a?\([\d\s.,%/]+\)|[a-zA-Z]+)$/.test(value);
    theme[role] = value && ok ? value : fallback;
  }
  return theme;
}

// The colour roles a chart's lines take in turn when a series names none.
export const JT_CHART_CYCLE = ["brand", "warn", "error", "success", "accent", "info"];

// uPlot's columns [xs, ys...] from series of [x, y] pairs: the union of the x values, sorted,
// each series null where it has no (finite) value.
export function jtAlign(seriesPoints) {
  const xs = new Set();
  for (const points of seriesPoints) {
    for (const p of points || []) if (Array.isArray(p) && Number.isFinite(p[0])) xs.add(p[0]);
  }
  const x = [...xs].sort((a, b) => a - b);
  const at = new Map(x.map((v, i) => [v, i]));
  const columns = [x];
  for (const points of seriesPoints) {
    const col = new Array(x.length).fill(null);
    for (const p of points || []) {
      if (Array.isArray(p) && Number.isFinite(p[0]) && Number.isFinite(p[1])) col[at.get(p[0])] = p[1];
    }
    columns.push(col);
  }
  return columns;
}

// The value each series shows in the legend: at the hovered point `idx`, or else its last finite
// value (the current one). Returns {x, values: [number|null...], hovered}.
export function jtLegendValues(data, idx) {
  const xs = data[0] || [];
  const hovered = Number.isInteger(idx) && idx >= 0 && idx < xs.length;
  const values = data.slice(1).map((col) => {
    if (hovered) return Number.isFinite(col[idx]) ? col[idx] : null;
    for (let i = col.length - 1; i >= 0; i--) if (Number.isFinite(col[i])) return col[i];
    return null;
  });
  let x = hovered ? xs[idx] : null;
  if (!hovered) {
    for (let i = xs.length - 1; i >= 0 && x === null; i--) {
      if (data.slice(1).some((col) => Number.isFinite(col[i]))) x = xs[i];
    }
  }
  return { x, values, hovered };
}

// A y range that keeps the lines off the frame: from 0 (counts, rates, latency) or the data's
// own low end, with a tenth of the span as headroom; a flat or empty series gets a unit span.
export function jtRange(min, max, fromZero) {
  if (!Number.isFinite(min) || !Number.isFinite(max)) return [0, 1];
  let lo = fromZero ? Math.min(0, min) : min;
  let hi = fromZero ? Math.max(0, max) : max;
  if (hi === lo) {
    const pad = Math.abs(hi) > 0 ? Math.abs(hi) * 0.1 : 1;
    return fromZero && lo >= 0 ? [0, hi + pad] : [lo - pad, hi + pad];
  }
  const pad = (hi - lo) * 0.1;
  return [fromZero && lo >= 0 ? lo : lo - pad, hi + pad];
}

// uPlot options for one chart (pure; uplot_chart.js adds the path builders and hooks).
// `spec`: {title, xLabel, yLabel, y2Label?, fromZero?, series: [{label, color?, scale?: "y"|"y2",
// dash?, step?}]}; `theme` from jtChartTheme; width and height in CSS pixels.
export function jtChartOptions(spec, theme, width, height) {
  const font = `11px ${theme.font}`;
  // The x axis needs a line of tick values; a y axis as wide as its longest value (never cut).
  const ySize = (u, values) => 12 + 7 * Math.max(3, ...(values || []).map((v) => String(v).length));
  const axis = (scale, label, side) => ({
    scale, label, side, stroke: theme.text, font, labelFont: font, labelSize: 14, labelGap: 0,
    size: side === 2 ? 24 : ySize,
    grid: { show: side !== 1, stroke: theme.grid, width: 1 },
    ticks: { show: true, stroke: theme.axis, width: 1, size: 4 },
    values: (u, splits) => splits.map(jtChartNum),
  });
  const fromZero = spec.fromZero !== false;
  const scales = {
    x: { time: false },
    y: { range: (u, min, max) => jtRange(min, max, fromZero) },
  };
  const axes = [axis("x", spec.xLabel || "", 2), axis("y", spec.yLabel || "", 3)];
  if (spec.y2Label) {
    scales.y2 = { range: (u, min, max) => jtRange(min, max, true) };
    axes.push(axis("y2", spec.y2Label, 1));
  }
  const series = [{ label: spec.xLabel || "x" }];
  spec.series.forEach((s, i) => {
    const stroke = theme[s.color] || theme[JT_CHART_CYCLE[i % JT_CHART_CYCLE.length]];
    series.push({ label: s.label, scale: s.scale || "y", stroke, width: 1.5, spanGaps: false,
                  dash: s.dash || undefined, points: { show: false }, value: (u, v) => jtChartNum(v) });
  });
  return {
    width: Math.max(120, Math.floor(width)), height: Math.max(60, Math.floor(height)),
    padding: [8, 8, 0, 0], legend: { show: false }, scales, axes, series,
    cursor: { drag: { x: false, y: false }, points: { size: 6 } },
  };
}

// The Load panel's rows -> its three charts' columns. `partial`: the newest second is only a part
// of one (still being counted while the test runs, or cut short by Stop); a third of a second
// reads as a drop in throughput, so it is left out (while running, until the next second's row
// arrives). x is the middle of each one-second bucket.
export function jtLoadData(rows, partial) {
  const list = [...(rows || [])].filter((r) => r && Number.isFinite(r.t)).sort((a, b) => a.t - b.t);
  const unfinished = partial && list.length ? list[list.length - 1].t : null;
  const done = unfinished === null ? list : list.slice(0, -1);
  const x = done.map((r) => r.t + 0.5);
  const col = (key) => done.map((r) => (Number.isFinite(r[key]) ? r[key] : null));
  return {
    unfinished,
    latency: [x, col("p50_ms"), col("p95_ms"), col("p99_ms")],
    traffic: [x, col("throughput_rps"), col("ready")],
    failures: [x, col("dropped"), col("late"), col("errors")],
  };
}

// The charts' specs for the Load panel (the titles and legends say what each line is).
export const JT_LOAD_CHARTS = {
  latency: { title: "latency", xLabel: "s since start", yLabel: "ms",
             series: [{ label: "p50", color: "brand" }, { label: "p95", color: "warn" },
                      { label: "p99", color: "error" }] },
  traffic: { title: "throughput · ready replicas", xLabel: "s since start", yLabel: "answers/s",
             y2Label: "replicas",
             series: [{ label: "throughput", color: "brand" },
                      { label: "ready", color: "success", scale: "y2", dash: [4, 2], step: true }] },
  failures: { title: "not served: dropped, late (the test) · errors (the service)", xLabel: "s since start",
              yLabel: "requests/s",
              series: [{ label: "dropped", color: "warnDark" }, { label: "late", color: "warnLight", dash: [3, 2] },
                       { label: "errors", color: "error" }] },
};

// The text a chart shows in words (its fallback when it cannot draw, and its aria-label).
export function jtChartText(spec, data) {
  const { x, values } = jtLegendValues(data, null);
  if (x === null) return `${spec.title}: no values yet`;
  const parts = spec.series.map((s, i) => `${s.label} ${jtChartNum(values[i])}`);
  return `${spec.title} at ${spec.xLabel} ${jtChartNum(x)}: ${parts.join(", ")}`;
}
