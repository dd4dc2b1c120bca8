// ServeView's Load panel: rps, seconds, concurrency, method, path and body; Start and Stop; a
// live chart of p50/p95/p99 latency over one of throughput and ready replicas and one of
// dropped, late and failed requests a second, on one time axis. The summary puts dropped and late
// (failures of the test) beside errors (failures of the service), says what each means and what
// to change, and which pods were measured. The kernel runs the load (load_panel.py) and sends {"kind": "load", state,
// message, summary, rows, reset, limit}; every text is set with textContent.

import { h } from "./view_common.js";

const JT_LOAD_SVG = "http://www.w3.org/2000/svg";
const JT_LOAD_W = 480;
const JT_LOAD_H = 110;
const JT_LOAD_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];

function jtLoadSvg(tag, attrs) {
  const node = document.createElementNS(JT_LOAD_SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  return node;
}

// Polyline points for [x, y] pairs (y null: a gap ends the run), x in 0..xMax, y in 0..yMax (pure).
export function jtLoadPaths(points, xMax, yMax, w, h) {
  const runs = [];
  let run = [];
  for (const [x, y] of points) {
    if (y === null || y === undefined || !Number.isFinite(y) || !Number.isFinite(x)) {
      if (run.length) runs.push(run);
      run = [];
      continue;
    }
    const px = 2 + (xMax > 0 ? (x / xMax) * (w - 4) : 0);
    const py = h - 2 - (yMax > 0 ? (Math.min(y, yMax) / yMax) * (h - 4) : 0);
    run.push(`${px.toFixed(1)},${py.toFixed(1)}`);
  }
  if (run.length) runs.push(run);
  return runs.map((r) => r.join(" "));
}

// A step line (replicas hold their value until the next row).
export function jtLoadSteps(points) {
  const out = [];
  let last = null;
  for (const [x, y] of points) {
    if (y === null || y === undefined) continue;
    if (last !== null && last !== y) out.push([x, last]);
    out.push([x, y]);
    last = y;
  }
  return out;
}

export function jtLoadNum(v, digits = 3) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  return String(Number(v.toPrecision(digits)));
}

// The summary's words (pure): its first line, then the kernel's findings (a "TEST LIMIT: ..."
// or "SERVICE: ..." sentence each), then what was measured.
export function jtLoadSummaryText(s) {
  if (!s || s.sent === undefined) return { line: "", findings: [], measured: "" };
  const pct = (n, of) => (of > 0 ? (100 * n / of).toFixed(1) : "0.0");
  let line =
    `${s.sent} sent of ${s.scheduled} scheduled (${jtLoadNum(s.sent_rps)}/s of ${jtLoadNum(s.asked_rps)} asked) · ` +
    `dropped ${s.dropped} (${pct(s.dropped, s.scheduled)} %) · late ${s.late} (${pct(s.late, s.sent)} %) · ` +
    `errors ${s.errors} (${(100 * (s.error_rate || 0)).toFixed(1)} %) · ${s.answered} answered · ` +
    `p50 ${jtLoadNum(s.p50_ms)} ms · p95 ${jtLoadNum(s.p95_ms)} ms · p99 ${jtLoadNum(s.p99_ms)} ms`;
  if (typeof s.canary_answered === "number" && s.canary_answered > 0) {
    const cpct = (100 * (s.canary_error_rate || 0)).toFixed(1);
    line += ` · canary: ${s.canary_answered} answered, errors ${s.canary_errors} (${cpct} %)`;
  }
  const findings = (Array.isArray(s.findings) ? s.findings : []).map((text) => ({
    text: String(text), kind: String(text).startsWith("SERVICE") ? "service" : "test",
  }));
  return { line, findings, measured: s.measured ? `measured: ${s.measured}` : "" };
}

export function jtLoadPanel(model) {
  const box = h("details", "jt-load");
  const title = h("summary", "jt-section jt-load-title", "Load");
  const form = h("div", "jt-controls jt-load-form");
  function field(label, input) {
    const wrap = h("label", "jt-load-field");
    wrap.append(h("span", "jt-label", label), input);
    return wrap;
  }
  function numberInput(cls, value, min, step) {
    const input = h("input", cls);
    input.type = "number";
    input.value = String(value);
    input.min = String(min);
    input.step = String(step);
    return input;
  }
  const rps = numberInput("jt-load-rps", 50, 0.1, "any");
  const seconds = numberInput("jt-load-seconds", 60, 1, "any");
  const concurrency = numberInput("jt-load-concurrency", 16, 1, 1);
  const method = h("select", "jt-load-method");
  for (const m of JT_LOAD_METHODS) method.appendChild(h("option", "", m));
  const path = h("input", "jt-load-path");
  path.value = "/";
  path.placeholder = "/path on the service";
  const body = h("textarea", "jt-load-body");
  body.placeholder = "body (text or JSON), optional";
  body.rows = 2;
  const startBtn = h("button", "jt-load-start", "Start");
  const stopBtn = h("button", "jt-cancel jt-load-stop", "Stop");
  stopBtn.disabled = true;
  form.append(field("rps", rps), field("seconds", seconds), field("concurrency", concurrency),
              field("method", method), field("path", path), startBtn, stopBtn);
  const state = h("span", "jt-load-state");
  const message = h("span", "jt-load-message");
  const status = h("div", "jt-load-status");
  status.append(state, message);
  const summary = h("div", "jt-load-summary");
  const charts = h("div", "jt-load-charts");
  const latency = chart("jt-load-latency", "latency (ms)", [["p50", "jt-load-p50"], ["p95", "jt-load-p95"],
                                                            ["p99", "jt-load-p99"]]);
  const traffic = chart("jt-load-traffic", "throughput (answers/s) · ready replicas",
                        [["throughput", "jt-load-throughput"], ["ready", "jt-load-ready"]]);
  const failures = chart("jt-load-failures", "requests/s not served: dropped, late (the test) · errors (the service)",
                         [["dropped", "jt-load-dropped"], ["late", "jt-load-late"], ["errors", "jt-load-errors"]]);
  charts.append(latency.box, traffic.box, failures.box);
  box.append(title, form, body, status, summary, charts);

  let rows = new Map(); // t -> row
  let running = false;
  let asked = { seconds: 60 };

  function chart(cls, label, lines) {
    const chartBox = h("div", `jt-load-chart ${cls}`);
    const head = h("div", "jt-load-chart-head");
    const legend = h("span", "jt-load-legend");
    for (const [name, lineCls] of lines) legend.appendChild(h("span", `jt-load-key ${lineCls}`, name));
    const range = h("span", "jt-load-range");
    head.append(h("span", "jt-label", label), legend, range);
    const svg = jtLoadSvg("svg", { width: JT_LOAD_W, height: JT_LOAD_H, viewBox: `0 0 ${JT_LOAD_W} ${JT_LOAD_H}`,
                                   role: "img" });
    chartBox.append(head, svg);
    return { box: chartBox, svg, range };
  }

  function draw(target, series, xMax, yMax, rangeText) {
    const { svg, range } = target;
    svg.replaceChildren(jtLoadSvg("rect", { x: 0.5, y: 0.5, width: JT_LOAD_W - 1, height: JT_LOAD_H - 1,
                                            class: "jt-chart-frame" }));
    for (const [cls, points, scale] of series) {
      for (const p of jtLoadPaths(points, xMax, scale ?? yMax, JT_LOAD_W, JT_LOAD_H)) {
        svg.appendChild(jtLoadSvg("polyline", { points: p, class: `jt-load-line ${cls}` }));
      }
    }
    range.textContent = rangeText;
  }

  function redraw() {
    const list = [...rows.values()].sort((a, b) => a.t - b.t);
    // Running: the asked length, or its first minute while it is longer; over: what ran.
    const ranTo = Math.max(1, ...list.map((r) => r.t + 1));
    const tMax = running ? Math.max(ranTo, Math.min(asked.seconds || 0, 60)) : ranTo;
    const pts = (key) => list.map((r) => [r.t + 0.5, r[key]]);
    const latMax = Math.max(0, ...list.map((r) => r.p99_ms ?? 0));
    draw(latency, [["jt-load-p50", pts("p50_ms")], ["jt-load-p95", pts("p95_ms")], ["jt-load-p99", pts("p99_ms")]],
         tMax, latMax, `0 … ${jtLoadNum(latMax)} ms over ${jtLoadNum(tMax)} s`);
    const thrMax = Math.max(0, ...list.map((r) => r.throughput_rps ?? 0));
    const repMax = Math.max(1, ...list.map((r) => Math.max(r.ready ?? 0, r.desired ?? 0)));
    const ready = jtLoadSteps(list.map((r) => [r.t, r.ready]));
    if (ready.length) ready.push([list[list.length - 1].t + 1, ready[ready.length - 1][1]]);
    draw(traffic, [["jt-load-throughput", pts("throughput_rps")], ["jt-load-ready", ready, repMax * 1.1]],
         tMax, thrMax, `0 … ${jtLoadNum(thrMax)}/s · ready 0 … ${repMax}`);
    const failMax = Math.max(1, ...list.map((r) => Math.max(r.dropped ?? 0, r.late ?? 0, r.errors ?? 0)));
    draw(failures, [["jt-load-dropped", pts("dropped")], ["jt-load-late", pts("late")],
                    ["jt-load-errors", pts("errors")]],
         tMax, failMax, `0 … ${jtLoadNum(failMax)}/s`);
    const last = list.length ? list[list.length - 1] : null;
    charts.dataset.rows = String(list.length);
    charts.dataset.ready = last && last.ready !== null && last.ready !== undefined ? String(last.ready) : "";
  }

  function showSummary(s) {
    const words = jtLoadSummaryText(s);
    if (!words.line) {
      summary.replaceChildren();
      return;
    }
    const parts = [h("div", "jt-load-summary-line", words.line)];
    for (const f of words.findings) parts.push(h("div", `jt-load-finding jt-load-finding-${f.kind}`, f.text));
    if (words.measured) parts.push(h("div", "jt-load-measured", words.measured));
    summary.replaceChildren(...parts);
    summary.dataset.sent = String(s.sent);
    summary.dataset.errorRate = String(s.error_rate || 0);
    summary.dataset.dropped = String(s.dropped || 0);
    summary.dataset.late = String(s.late || 0);
  }

  function receive(msg) {
    if (msg.reset) rows = new Map();
    for (const row of msg.rows || []) {
      if (row && Number.isFinite(row.t)) rows.set(row.t, row);
    }
    running = msg.state === "starting" || msg.state === "running";
    state.textContent = msg.state || "";
    state.dataset.state = msg.state || "";
    message.textContent = msg.message || "";
    if (Number.isFinite(msg.limit)) {
      rps.max = String(msg.limit);
      rps.title = `at most ${msg.limit} (this profile's load_limit_rps)`;
    }
    startBtn.disabled = running || model.get("terminal");
    stopBtn.disabled = !running;
    showSummary(msg.summary);
    redraw();
  }

  startBtn.addEventListener("click", () => {
    asked = { seconds: Number(seconds.value) };
    startBtn.disabled = true;
    model.send({ kind: "load_start", rps: Number(rps.value), seconds: Number(seconds.value),
                 concurrency: Number(concurrency.value), method: method.value, path: path.value,
                 body: body.value });
  });
  stopBtn.addEventListener("click", () => {
    stopBtn.disabled = true;
    model.send({ kind: "load_stop" });
  });
  redraw();
  return { el: box, receive };
}
