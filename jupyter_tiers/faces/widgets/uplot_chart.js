// One live time-series chart drawn by uPlot (vendor/uplot.js, shipped in the package: no CDN):
// axes with values and labels, gridlines, a legend under the plot with each line's current value
// that turns into the hovered point's read-out, coloured from JupyterLab's CSS variables (read
// again on each update, so a theme switch recolours it). The same module serves the notebook
// (esm_link.py) and the sidebar (webpack). What it draws comes from chart_data.js (pure); every
// label is set with textContent. If uPlot cannot draw (no canvas), the legend and a line of text
// still say the values.

import { uPlot } from "./vendor/uplot.js";
import { jtChartNum, jtChartOptions, jtChartText, jtChartTheme, jtLegendValues } from "./chart_data.js";
import { h } from "./view_common.js";

const JT_CHART_HEIGHT = 120;
const JT_CHART_MIN_WIDTH = 240;

// `box` gets the chart; `spec` as chart_data.js's jtChartOptions takes it. Returns
// {el, update(data), destroy()}; `data` is uPlot's columns [xs, ys...].
export function jtChart(spec, { height = JT_CHART_HEIGHT } = {}) {
  const el = h("div", "jt-uchart");
  if (spec.cls) el.classList.add(spec.cls);
  const title = h("div", "jt-uchart-title", spec.title);
  const plot = h("div", "jt-uchart-plot");
  plot.setAttribute("role", "img");
  const legend = h("div", "jt-uchart-legend");
  const fallback = h("div", "jt-uchart-text");
  fallback.hidden = true;
  const xItem = h("span", "jt-uchart-x");
  legend.appendChild(xItem);
  const items = spec.series.map((s) => {
    const item = h("span", "jt-uchart-item");
    item.dataset.series = s.label;
    const swatch = h("span", "jt-uchart-swatch");
    const value = h("span", "jt-uchart-value", "–");
    item.append(swatch, h("span", "jt-uchart-label", s.label), value);
    legend.appendChild(item);
    return { item, swatch, value };
  });
  el.append(title, plot, legend, fallback);
  plot.addEventListener("mouseleave", () => { hoverIdx = null; showLegend(); });

  let chart = null;
  let data = [[], ...spec.series.map(() => [])];
  let themeKey = "";
  let width = 0;
  let hoverIdx = null;

  function readTheme() {
    const style = typeof getComputedStyle === "function" ? getComputedStyle(el) : null;
    return jtChartTheme((name) => (style ? style.getPropertyValue(name) : ""));
  }

  function showLegend() {
    const { x, values, hovered } = jtLegendValues(data, hoverIdx);
    xItem.textContent = x === null ? `${spec.xLabel} –` : `${spec.xLabel} ${jtChartNum(x)}`;
    legend.dataset.hovered = hovered ? "1" : "";
    values.forEach((v, i) => {
      items[i].value.textContent = jtChartNum(v);
      items[i].item.dataset.value = v === null ? "" : String(v);
    });
    const text = jtChartText(spec, data);
    plot.setAttribute("aria-label", text);
    fallback.textContent = text;
  }

  function build(theme) {
    if (chart) chart.destroy();
    chart = null;
    const opts = jtChartOptions(spec, theme, width, height);
    spec.series.forEach((s, i) => {
      if (s.step && uPlot.paths && uPlot.paths.stepped) opts.series[i + 1].paths = uPlot.paths.stepped({ align: 1 });
      items[i].swatch.style.background = opts.series[i + 1].stroke;
      items[i].swatch.style.borderTopColor = opts.series[i + 1].stroke;
      if (s.dash) items[i].swatch.classList.add("jt-uchart-dashed");
    });
    // The tick values uPlot asked for, and the axis labels, as data attributes: the axes are
    // drawn on the canvas, so this is how a test (or a reader of the DOM) sees them.
    el.dataset.axes = opts.axes.map((a) => a.label).join("|");
    opts.axes.forEach((a, i) => {
      const values = a.values;
      a.values = (u, splits, ...rest) => {
        const out = values(u, splits, ...rest);
        el.dataset[`ticks${i}`] = out.join(" ");
        return out;
      };
    });
    opts.hooks = { setCursor: [(u) => { hoverIdx = u.cursor.idx ?? null; showLegend(); }] };
    try {
      chart = new uPlot(opts, data, plot);
      fallback.hidden = true;
    } catch (err) {
      chart = null; // no canvas here: the words stand in for the picture
      fallback.hidden = false;
    }
  }

  function update(next) {
    data = next;
    const theme = readTheme();
    const key = JSON.stringify(theme);
    const w = Math.max(JT_CHART_MIN_WIDTH, Math.floor(el.clientWidth || 0));
    if (!chart || key !== themeKey) {
      themeKey = key;
      width = w;
      build(theme);
    } else {
      if (w !== width) {
        width = w;
        chart.setSize({ width, height });
      }
      chart.setData(data);
      // The cursor's point moved under a still mouse, or the mouse is gone: read it again, so the
      // legend never stays on an old hover point (off the plot it shows the last point).
      const cursor = chart.cursor || {};
      hoverIdx = typeof cursor.left === "number" && cursor.left >= 0 ? (cursor.idx ?? null) : null;
    }
    el.dataset.points = String(data[0].length);
    showLegend();
  }

  // Follow the host's width (a sidebar panel or a notebook cell that is resized, a <details> opened).
  let observer = null;
  if (typeof ResizeObserver === "function") {
    observer = new ResizeObserver(() => {
      const w = Math.floor(el.clientWidth || 0);
      if (chart && w >= JT_CHART_MIN_WIDTH && w !== width) {
        width = w;
        chart.setSize({ width, height });
      }
    });
    observer.observe(el);
  }

  function destroy() {
    if (observer) observer.disconnect();
    if (chart) chart.destroy();
    chart = null;
  }

  return { el, update, destroy };
}
