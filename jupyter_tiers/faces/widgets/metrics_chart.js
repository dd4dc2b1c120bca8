// Live metric charts for JobView: one uPlot chart per metric (uplot_chart.js: axes with values,
// gridlines, a legend with the current value and a hover read-out), drawn from the widget's
// `metrics` trait ({key: [[x, y|null], ...]}, already downsampled in the kernel; x is the step),
// of one rank (`metrics_rank`; the view asks the kernel for the rank the log's filter shows).
// Every label is set with textContent.

import { h } from "./view_common.js";
import { jtAlign } from "./chart_data.js";
import { jtChart } from "./uplot_chart.js";

const JT_CHART_MAX = 8; // charts shown; the rest are listed by name

// The line above the charts: whose metrics they are, and a pending switch to another rank.
export function jtChartHeading(rank, wanted, note) {
  let text = `metrics of rank ${rank}`;
  if (wanted !== rank) text += ` · reading rank ${wanted}'s log…`;
  else if (rank !== 0) text += " · the log's rank filter picks the rank";
  return note ? `${text} · ${note}` : text;
}

// Draws `data` (one rank's series); `info` is {rank, wanted, note}: the charted rank, the rank
// asked for, and why the rank's earlier values are missing (if they are). A chart per metric is
// kept while its key stays, so uPlot only gets new data.
export function metricsChart(container) {
  const charts = new Map(); // key -> jtChart
  const heading = h("div", "jt-chart-heading");
  const more = h("div", "jt-chart-more");
  return function draw(data, info) {
    const keys = Object.keys(data || {}).filter((k) => k !== "step");
    const { rank = 0, wanted = rank, note = "" } = info || {};
    const shown = keys.slice(0, JT_CHART_MAX);
    for (const [key, chart] of charts) {
      if (!shown.includes(key)) {
        chart.destroy();
        charts.delete(key);
      }
    }
    if (!keys.length && rank === 0 && wanted === 0) { // a job without metrics: no charts
      container.replaceChildren();
      return;
    }
    heading.textContent = jtChartHeading(rank, wanted, note);
    heading.dataset.rank = String(rank);
    more.textContent = "";
    if (!keys.length) {
      if (wanted === rank) more.textContent = `no metrics in rank ${rank}'s log`;
    } else if (keys.length > JT_CHART_MAX) {
      more.textContent = `also: ${keys.slice(JT_CHART_MAX).join(", ")}`;
    }
    const boxes = shown.map((key) => {
      let chart = charts.get(key);
      if (!chart) {
        chart = jtChart({ title: key, xLabel: "step", yLabel: "", fromZero: false, cls: "jt-chart",
                          series: [{ label: key, color: "brand" }] }, { height: 110 });
        chart.el.dataset.metric = key;
        charts.set(key, chart);
      }
      return chart;
    });
    container.replaceChildren(heading, ...boxes.map((c) => c.el), ...(more.textContent ? [more] : []));
    shown.forEach((key, i) => boxes[i].update(jtAlign([data[key] || []])));
  };
}
