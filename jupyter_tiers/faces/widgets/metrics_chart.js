// Live metric charts for JobView: one small SVG line chart per metric, drawn from the widget's
// `metrics` trait ({key: [[x, y|null], ...]}, already downsampled in the kernel), of one rank
// (`metrics_rank`; the view asks the kernel for the rank the log's filter shows). No charting
// library; every label is set with textContent.

import { h } from "./view_common.js";

const JT_SVG = "http://www.w3.org/2000/svg";
const JT_CHART_W = 200;
const JT_CHART_H = 56;
const JT_CHART_MAX = 8; // charts shown; the rest are listed by name

function jtSvg(tag, attrs) {
  const node = document.createElementNS(JT_SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  return node;
}

export function jtNum(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return String(v ?? "nan");
  const a = Math.abs(v);
  if (v === Math.round(v) && a < 1e9) return String(v);
  if (a >= 1e-3 && a < 1e6) return String(Number(v.toPrecision(4)));
  if (a >= 1e-5 && a < 1e-3) return String(Number(v.toPrecision(3))); // 0.0003, as the summary
  return v.toExponential(2);
}

// The polyline's points for finite values, scaled into the chart box (pure, for tests).
export function jtChartPoints(points, w, h) {
  const good = points.filter((p) => Number.isFinite(p[0]) && Number.isFinite(p[1]));
  if (!good.length) return { path: "", min: null, max: null };
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  for (const [x, y] of good) {
    x0 = Math.min(x0, x); x1 = Math.max(x1, x);
    y0 = Math.min(y0, y); y1 = Math.max(y1, y);
  }
  const sx = x1 > x0 ? (w - 4) / (x1 - x0) : 0;
  const sy = y1 > y0 ? (h - 4) / (y1 - y0) : 0;
  const path = good
    .map(([x, y]) => `${(2 + (x1 > x0 ? (x - x0) * sx : (w - 4) / 2)).toFixed(1)},` +
                     `${(h - 2 - (y1 > y0 ? (y - y0) * sy : (h - 4) / 2)).toFixed(1)}`)
    .join(" ");
  return { path, min: y0, max: y1 };
}

// The line above the charts: whose metrics they are, and a pending switch to another rank.
export function jtChartHeading(rank, wanted, note) {
  let text = `metrics of rank ${rank}`;
  if (wanted !== rank) text += ` · reading rank ${wanted}'s log…`;
  else if (rank !== 0) text += " · the log's rank filter picks the rank";
  return note ? `${text} · ${note}` : text;
}

// Draws `data` (one rank's series); `info` is {rank, wanted, note}: the charted rank, the rank
// asked for, and why the rank's earlier values are missing (if they are).
export function metricsChart(container) {
  return function draw(data, info) {
    const keys = Object.keys(data || {}).filter((k) => k !== "step");
    const { rank = 0, wanted = rank, note = "" } = info || {};
    container.replaceChildren();
    if (!keys.length && rank === 0 && wanted === 0) return; // a job without metrics: no charts
    const heading = h("div", "jt-chart-heading", jtChartHeading(rank, wanted, note));
    heading.dataset.rank = String(rank);
    container.appendChild(heading);
    if (!keys.length) {
      if (wanted === rank) container.appendChild(h("div", "jt-chart-more", `no metrics in rank ${rank}'s log`));
      return;
    }
    for (const key of keys.slice(0, JT_CHART_MAX)) {
      const pts = data[key] || [];
      const last = pts.length ? pts[pts.length - 1][1] : null;
      const box = h("div", "jt-chart");
      box.dataset.metric = key;
      const label = h("div", "jt-chart-label");
      label.append(h("span", "jt-chart-key", key), h("span", "jt-chart-last", jtNum(last)));
      const svg = jtSvg("svg", { width: JT_CHART_W, height: JT_CHART_H, viewBox: `0 0 ${JT_CHART_W} ${JT_CHART_H}`,
                                 role: "img" });
      const title = jtSvg("title");
      title.textContent = `${key}: ${pts.length} points, last ${jtNum(last)}`;
      svg.appendChild(title);
      const { path, min, max } = jtChartPoints(pts, JT_CHART_W, JT_CHART_H);
      svg.appendChild(jtSvg("rect", { x: 0.5, y: 0.5, width: JT_CHART_W - 1, height: JT_CHART_H - 1,
                                      class: "jt-chart-frame" }));
      if (path) svg.appendChild(jtSvg("polyline", { points: path, class: "jt-chart-line" }));
      const range = h("div", "jt-chart-range", min === null ? "" : `${jtNum(min)} … ${jtNum(max)}`);
      box.append(label, svg, range);
      container.appendChild(box);
    }
    if (keys.length > JT_CHART_MAX) {
      container.appendChild(h("div", "jt-chart-more", `also: ${keys.slice(JT_CHART_MAX).join(", ")}`));
    }
  };
}
