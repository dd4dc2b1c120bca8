// jupyter-tiers ServeView front end. Everything from the cluster is set with textContent, never
// as HTML. Pod log lines arrive in batches as custom messages; the buffer is bounded by log_limit.
// The view is drawn in sections (header, controls and canary, rollout bar, pods, warning events,
// Load panel, log), each a function below that makes its elements and returns what render()
// wires together.

import { h, fmt, jtLogPane, jtSeen } from "./view_common.js";
import { jtTryPanel } from "./try_panel.js";
import { jtLoadPanel } from "./load_panel.js";

const MAX_SCALE = 100;
const CONFIRM_MS = 5000;
const FORWARD_RE = /^http:\/\/(127\.0\.0\.1|localhost|\[::1\]):\d{1,5}\/?$/;
// What changes the header (and the controls).
const HEADER_TRAITS = ["state", "reason", "revision", "endpoint", "age_s", "ready", "desired", "banner",
                       "message", "summary", "terminal", "busy", "forward_url", "service_name",
                       "profile", "namespace", "yaml", "model_source", "canary", "canary_counts"];

// A pod's restart marker line (requeue.restart_marker, as JobView's requeue marker).
const SERVE_RESTART_RE = /^— restart \d{1,6} —$/;

// Pod ages the kubectl way: 45s, 12m, 3h, 2d.
function shortAge(seconds) {
  if (seconds < 0) return "";
  if (seconds < 120) return `${Math.floor(seconds)}s`;
  if (seconds < 7200) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 172800) return `${Math.floor(seconds / 3600)}h`;
  return `${Math.floor(seconds / 86400)}d`;
}

async function copyText(button, text, label) {
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    button.textContent = "Copy failed (select the text instead)";
  }
  setTimeout(() => { button.textContent = label; }, 1500);
}

// Buttons that ask once more: the first click arms one for a few seconds ("Really delete?"),
// the second one acts. `disarm(btn)` forgets an armed click; `stop()` clears every timer.
function confirmations(model) {
  const timers = new Map();

  function disarm(btn) {
    clearTimeout(timers.get(btn));
    btn.dataset.confirm = "";
  }

  function arm(btn, label, question, kind) {
    btn.addEventListener("click", () => {
      if (btn.dataset.confirm !== "1") {
        btn.dataset.confirm = "1";
        btn.textContent = question;
        timers.set(btn, setTimeout(() => {
          btn.dataset.confirm = "";
          btn.textContent = label;
        }, CONFIRM_MS));
        return;
      }
      disarm(btn);
      btn.disabled = true;
      model.send({ kind });
    });
  }

  function stop() {
    for (const timer of timers.values()) clearTimeout(timer);
  }

  return { arm, disarm, stop };
}

// READY n/m; while a canary runs, both revisions counted (the Service sends traffic to both):
// "READY 2/2 (stable 1/1 · canary 1/1)".
function readyText(model) {
  const ready = model.get("ready");
  const desired = model.get("desired");
  const canary = model.get("canary_counts") || [];
  if (canary.length !== 2) return `READY ${ready}/${desired}`;
  const [cr, cd] = canary;
  return `READY ${ready + cr}/${desired + cd} (stable ${ready}/${desired} · canary ${cr}/${cd})`;
}

// The header (name, where, state, READY n/m, revision, age, endpoint, model source), the
// banner, reason and message lines, and the summary line (drawn at the bottom). The age ticks
// on in the browser.
function serveHeader(model) {
  const header = h("div", "jt-header");
  const title = h("span", "jt-title");
  const where = h("span", "jt-where");
  const state = h("span", "jt-state");
  const readyCount = h("span", "jt-ready-count");
  const revision = h("span", "jt-revision");
  const age = h("span", "jt-elapsed jt-age");
  const endpoint = h("span", "jt-endpoint");
  endpoint.title = "the service's address: inside the cluster, or its Ingress's once the controller reports one";
  const modelFrom = h("span", "jt-model-from");
  modelFrom.title = "the training job whose checkpoint this service serves (--model-from)";
  header.append(title, where, state, readyCount, revision, age, endpoint, modelFrom);
  const banner = h("div", "jt-banner");
  const reason = h("div", "jt-serve-reason");
  const message = h("div", "jt-message");
  const summary = h("div", "jt-summary");
  let ageAt = performance.now(); // when age_s arrived (the browser ticks on from there)
  model.on("change:age_s", () => { ageAt = performance.now(); });

  function refresh() {
    title.textContent = `service ${model.get("service_name")}`;
    const ns = model.get("namespace");
    where.textContent = model.get("profile") + (ns ? ` · ${ns}` : "");
    const st = model.get("state");
    state.textContent = st;
    state.dataset.state = st;
    const deleted = st === "DELETED";
    readyCount.textContent = deleted ? "" : readyText(model);
    revision.textContent = model.get("revision") ? `revision ${model.get("revision")}` : "";
    endpoint.textContent = model.get("endpoint");
    modelFrom.textContent = model.get("model_source") || "";
    banner.textContent = model.get("banner");
    reason.textContent = model.get("reason");
    message.textContent = model.get("message");
    summary.textContent = model.get("summary");
  }

  function tick() {
    const base = model.get("age_s");
    const live = model.get("state") !== "DELETED";
    const extra = live && base >= 0 ? (performance.now() - ageAt) / 1000 : 0;
    age.textContent = base >= 0 ? `age ${fmt(base + extra)}` : "";
  }

  return { header, banner, reason, message, summary, refresh, tick };
}

// The controls (replicas − n +, Restart, Delete, Port-forward and its link, Copy YAML, Copy
// endpoint, Try it and its panel when the view has one) and the canary's line with its two
// verbs (shown only while one runs).
function serveControls(model, tryPanel, confirm) {
  const bar = h("div", "jt-controls");
  const scaleBox = h("span", "jt-scale");
  const downBtn = h("button", "jt-scale-down", "−");
  downBtn.title = "one replica fewer";
  const replicas = h("span", "jt-replicas");
  const upBtn = h("button", "jt-scale-up", "+");
  upBtn.title = "one replica more";
  scaleBox.append(h("span", "jt-label", "replicas"), downBtn, replicas, upBtn);
  const restartBtn = h("button", "jt-restart", "Restart");
  const deleteBtn = h("button", "jt-cancel jt-delete", "Delete");
  const forwardBtn = h("button", "jt-forward", "Port-forward");
  const forwardLink = h("a", "jt-forward-url");
  forwardLink.target = "_blank";
  forwardLink.rel = "noopener noreferrer";
  const yamlBtn = h("button", "jt-copy-yaml", "Copy YAML");
  const endpointBtn = h("button", "jt-copy-endpoint", "Copy endpoint");
  const tryBtn = h("button", "jt-try-toggle", "Try it");
  tryBtn.title = "send a request to the service (or chat with it) through its forward, from the kernel";
  const tryBox = h("div", "jt-try-box");
  tryBox.hidden = true;
  const tryIt = tryPanel ? tryPanel({ model, box: tryBox }) : null;
  tryBtn.hidden = !tryIt;
  tryBtn.addEventListener("click", () => {
    tryBox.hidden = !tryBox.hidden;
    tryBtn.classList.toggle("jt-active", !tryBox.hidden);
    if (!tryBox.hidden) tryIt.shown();
  });
  bar.append(scaleBox, restartBtn, deleteBtn, forwardBtn, forwardLink, yamlBtn, endpointBtn, tryBtn);

  const canaryBox = h("div", "jt-canary");
  const canaryText = h("span", "jt-canary-text");
  const promoteBtn = h("button", "jt-promote", "Promote");
  promoteBtn.title = "roll every replica to the canary's revision and remove the canary";
  const rollbackBtn = h("button", "jt-rollback", "Roll back");
  rollbackBtn.title = "remove the canary; the live revision takes its replicas back";
  canaryBox.append(canaryText, promoteBtn, rollbackBtn);
  canaryBox.hidden = true;

  let localTarget = -1; // replicas asked for by a click, until the kernel's scale_target says

  function targetReplicas() {
    if (localTarget >= 0) return localTarget;
    const asked = model.get("scale_target");
    return asked >= 0 ? asked : model.get("desired");
  }

  function refresh() {
    const terminal = model.get("terminal");
    const busy = model.get("busy");
    const n = targetReplicas();
    replicas.textContent = String(n);
    replicas.title = model.get("scale_target") >= 0 ? `scaling to ${n}` : `${n} desired`;
    downBtn.disabled = terminal || n <= 0;
    upBtn.disabled = terminal || n >= MAX_SCALE;
    for (const btn of [restartBtn, deleteBtn, forwardBtn, promoteBtn, rollbackBtn]) {
      btn.disabled = terminal || busy !== "";
    }
    if (terminal) for (const btn of [restartBtn, deleteBtn, promoteBtn, rollbackBtn]) confirm.disarm(btn);
    const canary = model.get("canary") || "";
    canaryText.textContent = canary; // cluster text: shown as text
    canaryBox.hidden = !canary || terminal;
    if (busy === "promote") promoteBtn.textContent = "Promoting…";
    if (busy === "rollback") rollbackBtn.textContent = "Rolling back…";
    if (busy !== "promote" && promoteBtn.dataset.confirm !== "1") promoteBtn.textContent = "Promote";
    if (busy !== "rollback" && rollbackBtn.dataset.confirm !== "1") rollbackBtn.textContent = "Roll back";
    if (busy === "delete") deleteBtn.textContent = "Deleting…";
    if (busy === "restart") restartBtn.textContent = "Restarting…";
    if (busy !== "delete" && deleteBtn.dataset.confirm !== "1") deleteBtn.textContent = "Delete";
    if (busy !== "restart" && restartBtn.dataset.confirm !== "1") restartBtn.textContent = "Restart";
    forwardBtn.textContent = busy === "port_forward" ? "Forwarding…" : "Port-forward";
    // A routed service's endpoint may be "pending: ..." (no Ingress address yet): nothing to copy.
    endpointBtn.disabled = !model.get("endpoint") || model.get("endpoint").startsWith("pending:");
    yamlBtn.disabled = !model.get("yaml");
    const url = model.get("forward_url");
    if (url && FORWARD_RE.test(url)) {
      forwardLink.href = url;
      forwardLink.textContent = url;
    } else {
      forwardLink.removeAttribute("href");
      forwardLink.textContent = url; // shown, never made a link unless it is a local http URL
    }
  }

  // The kernel answered a scale (or the desired count changed): its numbers hold again.
  function forgetTarget() {
    localTarget = -1;
    refresh();
  }

  confirm.arm(deleteBtn, "Delete", "Really delete?", "delete");
  confirm.arm(restartBtn, "Restart", "Really restart all pods?", "restart");
  confirm.arm(promoteBtn, "Promote", "Really promote the canary?", "promote");
  confirm.arm(rollbackBtn, "Roll back", "Really remove the canary?", "rollback");

  function scaleBy(step) {
    const n = Math.max(0, Math.min(MAX_SCALE, targetReplicas() + step));
    localTarget = n;
    refresh();
    model.send({ kind: "scale", replicas: n });
  }
  downBtn.addEventListener("click", () => scaleBy(-1));
  upBtn.addEventListener("click", () => scaleBy(1));
  forwardBtn.addEventListener("click", () => {
    forwardBtn.disabled = true;
    model.send({ kind: "port_forward" });
  });
  yamlBtn.addEventListener("click", () => copyText(yamlBtn, model.get("yaml"), "Copy YAML"));
  endpointBtn.addEventListener("click", () => copyText(endpointBtn, model.get("endpoint"), "Copy endpoint"));

  return { bar, tryBox, canaryBox, refresh, forgetTarget };
}

// The rollout progress: updated / ready / available against desired.
function rolloutSection(model) {
  const el = h("div", "jt-rollout");
  const track = h("div", "jt-track");
  const barUpdated = h("div", "jt-bar jt-bar-updated");
  const barReady = h("div", "jt-bar jt-bar-ready");
  const barAvailable = h("div", "jt-bar jt-bar-available");
  track.append(barUpdated, barReady, barAvailable);
  const text = h("span", "jt-rollout-text");
  el.append(track, text);

  function refresh() {
    const desired = model.get("desired");
    const parts = { updated: model.get("updated"), ready: model.get("ready"), available: model.get("available") };
    const pct = (v) => (desired > 0 ? `${Math.min(100, (100 * v) / desired)}%` : "0%");
    barUpdated.style.width = pct(parts.updated);
    barReady.style.width = pct(parts.ready);
    barAvailable.style.width = pct(parts.available);
    text.textContent =
      `${parts.updated} updated · ${parts.ready} ready · ${parts.available} available of ${desired} desired`;
    el.hidden = model.get("state") === "DELETED";
  }

  return { el, refresh };
}

// The pod table. `filter()` is the pod whose log is shown ("" for all); a click on a row calls
// `onPick(name)`. Pod ages tick on in the browser from when the rows arrived.
function podsSection(model, filter, onPick) {
  const table = h("table", "jt-pods");
  const head = h("thead");
  const headRow = h("tr");
  for (const col of ["pod", "track", "phase", "ready", "restarts", "node", "age", "why not ready"]) {
    headRow.appendChild(h("th", col === "track" ? "jt-pod-track" : "", col));
  }
  const trackHead = headRow.children[1];
  head.appendChild(headRow);
  const body = h("tbody");
  table.append(head, body);
  let podsAt = performance.now(); // when the pod rows (and their ages) arrived
  model.on("change:pods", () => { podsAt = performance.now(); });

  function refresh() {
    const pods = model.get("pods");
    body.replaceChildren();
    // The track column shows only while a canary runs (each pod: stable or canary).
    const tracked = pods.some((p) => p[8]);
    trackHead.hidden = !tracked;
    for (const [name, phase, ready, restarts, node, ageS, problem, current, track = ""] of pods) {
      const row = h("tr", "jt-pod");
      row.dataset.pod = name;
      row.dataset.age = String(ageS);
      row.dataset.phase = phase;
      row.dataset.track = track;
      row.classList.toggle("jt-old", !current);
      row.classList.toggle("jt-canary-pod", track === "canary");
      row.classList.toggle("jt-not-ready", !ready);
      row.classList.toggle("jt-selected", name === filter());
      row.title = `${name}${track ? ` (${track})` : ""}${current ? "" : " (previous revision)"} · click to show only its log`;
      const readyCell = h("td", "jt-pod-ready", ready ? "✓" : "✗");
      readyCell.dataset.ready = ready ? "1" : "0";
      const trackCell = h("td", "jt-pod-track", track);
      trackCell.hidden = !tracked;
      row.append(h("td", "jt-pod-name", name), trackCell, h("td", "jt-pod-phase", phase), readyCell,
                 h("td", "jt-num", String(restarts)), h("td", "", node), h("td", "jt-num jt-pod-age", shortAge(ageS)),
                 h("td", "jt-pod-problem", problem));
      row.addEventListener("click", () => onPick(name));
      body.appendChild(row);
    }
    table.hidden = pods.length === 0;
  }

  function tick() {
    const extra = (performance.now() - podsAt) / 1000;
    for (const row of body.children) {
      const baseAge = Number(row.dataset.age);
      if (baseAge >= 0) row.querySelector(".jt-pod-age").textContent = shortAge(baseAge + extra);
    }
  }

  // Marks the row of the pod whose log is shown.
  function select(pod) {
    for (const row of body.children) row.classList.toggle("jt-selected", row.dataset.pod === pod);
  }

  return { table, refresh, tick, select };
}

// The warning events: [reason, object, message, count, age_s, gone] rows (repeats already
// collapsed by the kernel). Ages tick on in the browser from when the rows arrived; events of a
// pod that is gone are faded and say so.
function eventsSection(model) {
  const el = h("div", "jt-events");
  const list = h("div", "jt-event-list");
  el.append(h("div", "jt-section", "Warning events"), list);
  let eventsAt = performance.now();

  function refresh() {
    const events = model.get("events");
    eventsAt = performance.now();
    list.replaceChildren();
    for (const [why, obj, text, count, ageS, gone] of events) {
      const row = h("div", gone ? "jt-event jt-event-gone" : "jt-event");
      row.dataset.age = String(ageS);
      if (gone) row.title = "this pod is gone: the event is history";
      row.append(h("span", "jt-event-reason", why), h("span", "jt-event-object", gone ? `${obj} (gone)` : obj),
                 h("span", "jt-event-message", text),
                 h("span", "jt-event-count", count > 1 ? `×${count}` : ""),
                 h("span", "jt-event-age", ageS >= 0 ? `${shortAge(ageS)} ago` : ""));
      list.appendChild(row);
    }
    el.hidden = events.length === 0;
  }

  function tick() {
    const extra = (performance.now() - eventsAt) / 1000;
    for (const row of list.children) {
      const baseAge = Number(row.dataset.age);
      if (baseAge >= 0) row.lastChild.textContent = `${shortAge(baseAge + extra)} ago`;
    }
  }

  return { el, refresh, tick };
}

// The log: its bar (the pod filter, Follow/Pause, Jump to first error), the lines, and the note
// on lines not sent. `filter()` is the pod shown ("" for all); choosing one calls `onPick(name)`.
// Rows are [pod, text, isError].
function logSection(model, filter, onPick) {
  const bar = h("div", "jt-controls jt-log-controls");
  const podSelect = h("select", "jt-pod-filter");
  const followBtn = h("button", "jt-follow", "Pause");
  const errorBtn = h("button", "jt-jump-error", "Jump to first error");
  errorBtn.disabled = true;
  bar.append(h("span", "jt-section", "Log"), h("span", "jt-spacer"), podSelect, followBtn, errorBtn);
  const logBox = h("div", "jt-log");
  const skippedNote = h("div", "jt-skipped");
  const logPods = new Set(); // every pod a line came from
  let skipped = 0;

  function shortPod(name) {
    const prefix = model.get("service_name") + "-";
    return name && name.startsWith(prefix) && name.length > prefix.length ? name.slice(prefix.length) : name;
  }

  function lineNode(row) {
    const [pod, text, isError] = row;
    const div = h("div", "jt-line");
    if (isError) div.classList.add("jt-error");
    if (SERVE_RESTART_RE.test(text)) div.classList.add("jt-restart"); // a container restart began here
    const prefix = h("span", "jt-prefix", `${shortPod(pod)}: `);
    div.append(prefix, h("span", "jt-text", text));
    return div;
  }

  const pane = jtLogPane({ model, logBox, followBtn, errorBtn, lineNode,
                           visible: (row) => !filter() || row[0] === filter(), filtered: () => filter() !== "" });

  // "all pods", then every pod of the table or the log (and the one shown), sorted.
  function refreshPodSelect() {
    const names = new Set(model.get("pods").map((p) => p[0]));
    for (const p of logPods) names.add(p);
    if (filter()) names.add(filter());
    const wanted = ["", ...[...names].sort()];
    const have = [...podSelect.options].map((o) => o.value);
    if (have.length !== wanted.length || have.some((v, i) => v !== wanted[i])) {
      podSelect.replaceChildren();
      for (const name of wanted) {
        const o = h("option", "", name ? name : "all pods");
        o.value = name;
        podSelect.appendChild(o);
      }
    }
    podSelect.value = filter();
  }

  function notePods(rows) {
    let added = false;
    for (const row of rows) {
      if (!logPods.has(row[0])) { logPods.add(row[0]); added = true; }
    }
    if (added) refreshPodSelect();
  }

  function receive(msg) {
    skipped += msg.skipped || 0;
    skippedNote.textContent = skipped
      ? `${skipped} lines were not sent to the browser (too fast); service.logs() has them`
      : "";
    notePods(msg.lines);
    pane.receive(msg.lines, msg.reset);
  }

  podSelect.addEventListener("change", () => onPick(podSelect.value));

  return { bar, logBox, skippedNote, receive, redraw: pane.redraw, refreshPodSelect };
}

// The view with its optional panels: `tryPanel` (try_panel.js's jtTryPanel) and `loadPanel`
// (load_panel.js's jtLoadPanel). The notebook widget has both (the default export); the lab
// panel has no kernel to run them, so it leaves them out.
export function serveView({ tryPanel = null, loadPanel = null } = {}) {
  function render({ model, el }) {
    const root = h("div", "jt-job jt-serve");
    el.appendChild(root);
    let filter = ""; // the pod whose log is shown, or "" for all

    const confirm = confirmations(model);
    const head = serveHeader(model);
    const controls = serveControls(model, tryPanel, confirm);
    const rollout = rolloutSection(model);
    const pods = podsSection(model, () => filter, (name) => setFilter(filter === name ? "" : name));
    const events = eventsSection(model);
    const log = logSection(model, () => filter, (name) => setFilter(name));
    const load = loadPanel ? loadPanel(model) : null;
    root.append(head.header, head.banner, head.reason, head.message, controls.bar, controls.tryBox, rollout.el,
                controls.canaryBox, pods.table, events.el, ...(load ? [load.el] : []), log.bar, log.logBox,
                log.skippedNote, head.summary);

    function setFilter(pod) {
      filter = pod;
      pods.select(filter);
      log.refreshPodSelect();
      log.redraw();
    }

    function tick() {
      head.tick();
      pods.tick();
      events.tick();
    }
    const ticker = setInterval(tick, 1000);

    function refreshHeader() {
      head.refresh();
      controls.refresh();
      tick();
    }

    function refreshPods() {
      pods.refresh();
      log.refreshPodSelect();
    }

    model.on("msg:custom", (msg) => {
      if (msg && msg.kind === "load") { if (load) load.receive(msg); return; }
      if (!msg || msg.kind !== "lines" || !Array.isArray(msg.lines)) return;
      log.receive(msg);
    });
    for (const name of HEADER_TRAITS) model.on(`change:${name}`, refreshHeader);
    model.on("change:scale_target", controls.forgetTarget);
    model.on("change:desired", controls.forgetTarget);
    for (const name of ["desired", "updated", "ready", "available", "state"]) {
      model.on(`change:${name}`, rollout.refresh);
    }
    model.on("change:pods", () => { refreshPods(); tick(); });
    model.on("change:events", () => { events.refresh(); events.tick(); });

    refreshHeader();
    rollout.refresh();
    refreshPods();
    events.refresh();
    model.send({ kind: "hello" });
    const unseen = jtSeen(model);
    return () => {
      clearInterval(ticker);
      confirm.stop();
      unseen();
    };
  }
  return { render };
}

// The events section alone, for its tests.
export const jtEventsSection = eventsSection;

// (pure: a host that takes only serveView, as the lab panel does, bundles neither panel)
export default /* @__PURE__ */ serveView({ tryPanel: jtTryPanel, loadPanel: jtLoadPanel });
