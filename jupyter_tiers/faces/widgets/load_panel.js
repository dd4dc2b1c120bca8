// ServeView's Load panel: rps, seconds, concurrency, method, path and body; Start and Stop; live
// uPlot charts (uplot_chart.js; the data from chart_data.js's jtLoadData) of p50/p95/p99 latency,
// of throughput and ready replicas, and of dropped, late and failed requests a second, on one
// time axis; the second still being counted is left out until it is complete. The summary puts dropped and late
// (failures of the test) beside errors (failures of the service), says what each means and what
// to change, and which pods were measured. The kernel runs the load (load_panel.py) and sends {"kind": "load", state,
// message, summary, rows, reset, limit}; every text is set with textContent.

import { h } from "./view_common.js";
import { JT_LOAD_CHARTS, jtLoadData } from "./chart_data.js";
import { jtChart } from "./uplot_chart.js";

const JT_LOAD_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];

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
  const latency = jtChart({ ...JT_LOAD_CHARTS.latency, cls: "jt-load-latency" });
  const traffic = jtChart({ ...JT_LOAD_CHARTS.traffic, cls: "jt-load-traffic" });
  const failures = jtChart({ ...JT_LOAD_CHARTS.failures, cls: "jt-load-failures" });
  const pending = h("div", "jt-load-pending");
  charts.append(latency.el, traffic.el, failures.el, pending);
  box.append(title, form, body, status, summary, charts);

  let rows = new Map(); // t -> row
  let running = false;

  function redraw() {
    const list = [...rows.values()];
    const stopped = state.dataset.state === "stopped";
    const data = jtLoadData(list, running || stopped);
    latency.update(data.latency);
    traffic.update(data.traffic);
    failures.update(data.failures);
    // The second being counted is not drawn (a part of a second reads as a drop): say so.
    const span = `second ${data.unfinished}–${data.unfinished + 1}`;
    pending.textContent = data.unfinished === null ? ""
      : running ? `${span} is still being counted` : `${span} was cut short by Stop: not drawn`;
    const last = list.length ? list.reduce((a, b) => (b.t > a.t ? b : a)) : null;
    charts.dataset.rows = String(list.length);
    charts.dataset.drawn = String(data.latency[0].length);
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
