// jupyter-tiers ServeView front end. Everything from the cluster is set with textContent, never
// as HTML. Pod log lines arrive in batches as custom messages; the buffer is bounded by log_limit.
// h(), fmt() and jtLogPane() come from view_common.js, which serve_view.py puts in front of this module.

const MAX_SCALE = 100;
const CONFIRM_MS = 5000;
const FORWARD_RE = /^http:\/\/(127\.0\.0\.1|localhost|\[::1\]):\d{1,5}\/?$/;

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

function render({ model, el }) {
  const root = h("div", "jt-job jt-serve");
  el.appendChild(root);

  // Header: name, where, state, READY n/m, revision, age, endpoint
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

  // Controls
  const controls = h("div", "jt-controls");
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
  // Try it (try_panel.js, put in front of this module; the lab panel runs without it).
  const tryBtn = h("button", "jt-try-toggle", "Try it");
  tryBtn.title = "send a request to the service (or chat with it) through its forward, from the kernel";
  const tryBox = h("div", "jt-try-box");
  tryBox.hidden = true;
  const tryPanel = typeof jtTryPanel === "function" ? jtTryPanel({ model, box: tryBox }) : null;
  tryBtn.hidden = !tryPanel;
  tryBtn.addEventListener("click", () => {
    tryBox.hidden = !tryBox.hidden;
    tryBtn.classList.toggle("jt-active", !tryBox.hidden);
    if (!tryBox.hidden) tryPanel.shown();
  });
  controls.append(scaleBox, restartBtn, deleteBtn, forwardBtn, forwardLink, yamlBtn, endpointBtn, tryBtn);

  // Rollout progress: updated / ready / available against desired
  const rollout = h("div", "jt-rollout");
  const track = h("div", "jt-track");
  const barUpdated = h("div", "jt-bar jt-bar-updated");
  const barReady = h("div", "jt-bar jt-bar-ready");
  const barAvailable = h("div", "jt-bar jt-bar-available");
  track.append(barUpdated, barReady, barAvailable);
  const rolloutText = h("span", "jt-rollout-text");
  rollout.append(track, rolloutText);

  // Canary (--canary): its line and its two verbs, shown only while one runs
  const canaryBox = h("div", "jt-canary");
  const canaryText = h("span", "jt-canary-text");
  const promoteBtn = h("button", "jt-promote", "Promote");
  promoteBtn.title = "roll every replica to the canary's revision and remove the canary";
  const rollbackBtn = h("button", "jt-rollback", "Roll back");
  rollbackBtn.title = "remove the canary; the live revision takes its replicas back";
  canaryBox.append(canaryText, promoteBtn, rollbackBtn);
  canaryBox.hidden = true;

  // Pods
  const podTable = h("table", "jt-pods");
  const podHead = h("thead");
  const headRow = h("tr");
  for (const col of ["pod", "phase", "ready", "restarts", "node", "age", "why not ready"]) {
    headRow.appendChild(h("th", "", col));
  }
  podHead.appendChild(headRow);
  const podBody = h("tbody");
  podTable.append(podHead, podBody);

  // Warning events
  const eventsBox = h("div", "jt-events");
  const eventsTitle = h("div", "jt-section", "Warning events");
  const eventsList = h("div", "jt-event-list");
  eventsBox.append(eventsTitle, eventsList);

  // Log
  const logControls = h("div", "jt-controls jt-log-controls");
  const podSelect = h("select", "jt-pod-filter");
  const followBtn = h("button", "jt-follow", "Pause");
  const errorBtn = h("button", "jt-jump-error", "Jump to first error");
  errorBtn.disabled = true;
  logControls.append(h("span", "jt-section", "Log"), h("span", "jt-spacer"), podSelect, followBtn, errorBtn);
  const logBox = h("div", "jt-log");
  const skippedNote = h("div", "jt-skipped");
  const summary = h("div", "jt-summary");

  // Load panel (load_panel.js, put in front of this module; the lab panel runs without it).
  const loadPanel = typeof jtLoadPanel === "function" ? jtLoadPanel(model) : null;

  root.append(header, banner, reason, message, controls, tryBox, rollout, canaryBox, podTable, eventsBox,
              ...(loadPanel ? [loadPanel.el] : []), logControls, logBox, skippedNote, summary);

  let filter = ""; // a pod name, or "" for all
  let skipped = 0;
  let ageAt = Date.now(); // when age_s arrived (the browser ticks on from there)
  let podsAt = Date.now(); // when the pod rows (and their ages) arrived
  let localTarget = -1; // replicas asked for by a click, until the kernel's scale_target says
  const logPods = new Set();
  const confirmTimers = new Map();

  function shortPod(name) {
    const prefix = model.get("service_name") + "-";
    return name && name.startsWith(prefix) && name.length > prefix.length ? name.slice(prefix.length) : name;
  }

  function targetReplicas() {
    if (localTarget >= 0) return localTarget;
    const asked = model.get("scale_target");
    return asked >= 0 ? asked : model.get("desired");
  }

  // --- header, banner, controls ------------------------------------------------------------
  function refreshHeader() {
    title.textContent = `service ${model.get("service_name")}`;
    const ns = model.get("namespace");
    where.textContent = model.get("profile") + (ns ? ` · ${ns}` : "");
    const st = model.get("state");
    state.textContent = st;
    state.dataset.state = st;
    const deleted = st === "DELETED";
    readyCount.textContent = deleted ? "" : `READY ${model.get("ready")}/${model.get("desired")}`;
    revision.textContent = model.get("revision") ? `revision ${model.get("revision")}` : "";
    endpoint.textContent = model.get("endpoint");
    modelFrom.textContent = model.get("model_source") || "";
    banner.textContent = model.get("banner");
    reason.textContent = model.get("reason");
    message.textContent = model.get("message");
    summary.textContent = model.get("summary");
    refreshControls();
    tick();
  }

  function refreshControls() {
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
    if (terminal) for (const btn of [restartBtn, deleteBtn, promoteBtn, rollbackBtn]) unconfirm(btn);
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

  function tick() {
    const base = model.get("age_s");
    const live = model.get("state") !== "DELETED";
    const extra = live && base >= 0 ? (Date.now() - ageAt) / 1000 : 0;
    age.textContent = base >= 0 ? `age ${fmt(base + extra)}` : "";
    const podExtra = (Date.now() - podsAt) / 1000;
    for (const row of podBody.children) {
      const baseAge = Number(row.dataset.age);
      if (baseAge >= 0) row.children[5].textContent = shortAge(baseAge + podExtra);
    }
  }
  const ticker = setInterval(tick, 1000);

  // --- rollout bar --------------------------------------------------------------------------
  function refreshRollout() {
    const desired = model.get("desired");
    const parts = { updated: model.get("updated"), ready: model.get("ready"), available: model.get("available") };
    const pct = (v) => (desired > 0 ? `${Math.min(100, (100 * v) / desired)}%` : "0%");
    barUpdated.style.width = pct(parts.updated);
    barReady.style.width = pct(parts.ready);
    barAvailable.style.width = pct(parts.available);
    rolloutText.textContent =
      `${parts.updated} updated · ${parts.ready} ready · ${parts.available} available of ${desired} desired`;
    rollout.hidden = model.get("state") === "DELETED";
  }

  // --- pods -------------------------------------------------------------------------------------
  function refreshPods() {
    const pods = model.get("pods");
    podBody.replaceChildren();
    for (const [name, phase, ready, restarts, node, ageS, problem, current] of pods) {
      const row = h("tr", "jt-pod");
      row.dataset.pod = name;
      row.dataset.age = String(ageS);
      row.dataset.phase = phase;
      row.classList.toggle("jt-old", !current);
      row.classList.toggle("jt-not-ready", !ready);
      row.classList.toggle("jt-selected", name === filter);
      row.title = `${name}${current ? "" : " (previous revision)"} · click to show only its log`;
      const readyCell = h("td", "jt-pod-ready", ready ? "✓" : "✗");
      readyCell.dataset.ready = ready ? "1" : "0";
      row.append(h("td", "jt-pod-name", name), h("td", "", phase), readyCell,
                 h("td", "jt-num", String(restarts)), h("td", "", node), h("td", "jt-num", shortAge(ageS)),
                 h("td", "jt-pod-problem", problem));
      row.addEventListener("click", () => setFilter(filter === name ? "" : name));
      podBody.appendChild(row);
    }
    podTable.hidden = pods.length === 0;
    refreshPodSelect();
  }

  function refreshPodSelect() {
    const names = new Set(model.get("pods").map((p) => p[0]));
    for (const p of logPods) names.add(p);
    if (filter) names.add(filter);
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
    podSelect.value = filter;
  }

  // --- events -------------------------------------------------------------------------------
  function refreshEvents() {
    const events = model.get("events");
    eventsList.replaceChildren();
    for (const [why, obj, text, count, ageS] of events) {
      const row = h("div", "jt-event");
      row.append(h("span", "jt-event-reason", why), h("span", "jt-event-object", obj),
                 h("span", "jt-event-message", text),
                 h("span", "jt-event-count", count > 1 ? `×${count}` : ""),
                 h("span", "jt-event-age", ageS >= 0 ? `${shortAge(ageS)} ago` : ""));
      eventsList.appendChild(row);
    }
    eventsBox.hidden = events.length === 0;
  }

  // --- log ----------------------------------------------------------------------------------------
  function lineNode(row) {
    const [pod, text, isError] = row;
    const div = h("div", "jt-line");
    if (isError) div.classList.add("jt-error");
    const prefix = h("span", "jt-prefix", `${shortPod(pod)}: `);
    div.append(prefix, h("span", "jt-text", text));
    return div;
  }

  function visible(row) {
    return !filter || row[0] === filter;
  }

  // Rows are [pod, text, isError].
  const logPane = jtLogPane({ model, logBox, followBtn, errorBtn, lineNode, visible,
                              filtered: () => filter !== "" });

  function notePods(rows) {
    let added = false;
    for (const row of rows) {
      if (!logPods.has(row[0])) { logPods.add(row[0]); added = true; }
    }
    if (added) refreshPodSelect();
  }

  function setFilter(pod) {
    filter = pod;
    for (const row of podBody.children) row.classList.toggle("jt-selected", row.dataset.pod === filter);
    refreshPodSelect();
    logPane.redraw();
  }

  model.on("msg:custom", (msg) => {
    if (msg && msg.kind === "load") { if (loadPanel) loadPanel.receive(msg); return; }
    if (!msg || msg.kind !== "lines" || !Array.isArray(msg.lines)) return;
    skipped += msg.skipped || 0;
    skippedNote.textContent = skipped
      ? `${skipped} lines were not sent to the browser (too fast); service.logs() has them`
      : "";
    notePods(msg.lines);
    logPane.receive(msg.lines, msg.reset);
  });

  // --- actions --------------------------------------------------------------------------------
  function unconfirm(btn) {
    clearTimeout(confirmTimers.get(btn));
    btn.dataset.confirm = "";
  }

  // First click arms the button for a few seconds ("Really delete?"); the second one acts.
  function confirmThen(btn, label, question, kind) {
    btn.addEventListener("click", () => {
      if (btn.dataset.confirm !== "1") {
        btn.dataset.confirm = "1";
        btn.textContent = question;
        confirmTimers.set(btn, setTimeout(() => {
          btn.dataset.confirm = "";
          btn.textContent = label;
        }, CONFIRM_MS));
        return;
      }
      unconfirm(btn);
      btn.disabled = true;
      model.send({ kind });
    });
  }
  confirmThen(deleteBtn, "Delete", "Really delete?", "delete");
  confirmThen(restartBtn, "Restart", "Really restart all pods?", "restart");
  confirmThen(promoteBtn, "Promote", "Really promote the canary?", "promote");
  confirmThen(rollbackBtn, "Roll back", "Really remove the canary?", "rollback");

  function scaleBy(step) {
    const n = Math.max(0, Math.min(MAX_SCALE, targetReplicas() + step));
    localTarget = n;
    refreshControls();
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

  podSelect.addEventListener("change", () => setFilter(podSelect.value));

  model.on("change:age_s", () => { ageAt = Date.now(); });
  model.on("change:pods", () => { podsAt = Date.now(); });
  for (const name of ["state", "reason", "revision", "endpoint", "age_s", "ready", "desired", "banner",
                      "message", "summary", "terminal", "busy", "forward_url", "service_name",
                      "profile", "namespace", "yaml", "model_source", "canary"]) {
    model.on(`change:${name}`, refreshHeader);
  }
  model.on("change:scale_target", () => { localTarget = -1; refreshControls(); });
  model.on("change:desired", () => { localTarget = -1; refreshControls(); });
  for (const name of ["desired", "updated", "ready", "available", "state"]) {
    model.on(`change:${name}`, refreshRollout);
  }
  model.on("change:pods", () => { refreshPods(); tick(); });
  model.on("change:events", refreshEvents);

  refreshHeader();
  refreshRollout();
  refreshPods();
  refreshEvents();
  model.send({ kind: "hello" });
  return () => {
    clearInterval(ticker);
    for (const timer of confirmTimers.values()) clearTimeout(timer);
  };
}

export default { render };
