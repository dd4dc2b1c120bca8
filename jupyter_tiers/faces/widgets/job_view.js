// jupyter-tiers JobView front end. Everything from the cluster is set with textContent, never
// as HTML. Log lines arrive in batches as custom messages; the buffer is bounded by log_limit.
// The view is drawn in sections (header, controls, rank grid, metric charts, log), each a
// function below that makes its elements and returns what render() wires together.

import { h, fmt, jtLogPane, jtSeen } from "./view_common.js";
import { jtRankGrid, jtUsageLevel, jtUsageText } from "./rank_grid.js";
import { metricsChart } from "./metrics_chart.js";
import { jtFilesPane } from "./files_pane.js";

const PHASE_NAMES = { w: "waiting", r: "running", x: "exited", f: "failed", s: "stopped" };
// The line the batch script writes when a requeued job starts again (requeue.py).
const RESTART_RE = /^— restart \d{1,6} —$/;
// A log line's "R: " prefix; the same split as the kernel's split_log_line.
const RANK_RE = /^(\d{1,7}): ?([\s\S]*)$/;
// What changes the header (and the Cancel button).
const HEADER_TRAITS = ["state", "reason", "start_time", "elapsed_s", "nodelist", "message", "summary",
                       "terminal", "cancel_requested", "job_id", "job_name", "checkpoint", "restarts",
                       "straggler", "stalled"];

// The header (id, name, state, restarts, reason, elapsed, nodes, checkpoint), the message line
// and the summary line. The elapsed time ticks on in the browser while the job runs.
function jobHeader(model) {
  const header = h("div", "jt-header");
  const title = h("span", "jt-title");
  const state = h("span", "jt-state");
  const reason = h("span", "jt-reason");
  const elapsed = h("span", "jt-elapsed");
  const nodes = h("span", "jt-nodes");
  const checkpoint = h("span", "jt-checkpoint");
  const restarts = h("span", "jt-restarts");
  restarts.title = "the job was requeued (preempted, node failure or scontrol requeue) and started again; the log marks each restart";
  checkpoint.title = "the newest file in $JT_CHECKPOINT_DIR (%%k8s_serve --model-from serves it)";
  const straggler = h("span", "jt-straggler");
  straggler.title = "this rank's progress (CPU time of its processes) lags the other ranks' median";
  const stalled = h("span", "jt-stalled");
  stalled.title = "every rank running, no new log line and every rank's CPU near idle: the Stacks button shows where each rank is";
  header.append(title, state, restarts, reason, elapsed, nodes, checkpoint, straggler, stalled);
  const message = h("div", "jt-message");
  const summary = h("div", "jt-summary");
  // performance.now(), not Date.now(): a wall clock stepped ±1 h must not tick the elapsed time.
  let lastElapsedAt = performance.now();

  function refresh() {
    title.textContent = `job ${model.get("job_id")} · ${model.get("job_name")}`;
    const st = model.get("state");
    state.textContent = st;
    state.dataset.state = st;
    const r = model.get("reason");
    const start = model.get("start_time");
    reason.textContent =
      st === "PENDING" && r ? `(${r}${start ? ", expected start " + start : ""})` : "";
    nodes.textContent = model.get("nodelist") ? `on ${model.get("nodelist")}` : "";
    const n = model.get("restarts") || 0;
    restarts.textContent = n ? `restart ${n}` : "";
    checkpoint.textContent = model.get("checkpoint") ? `checkpoint ${model.get("checkpoint")}` : "";
    straggler.textContent = model.get("straggler") ? `straggler: ${model.get("straggler")}` : "";
    stalled.textContent = model.get("stalled") || "";
    message.textContent = model.get("message");
    summary.textContent = model.get("summary");
  }

  function tick() {
    const base = model.get("elapsed_s");
    const running = model.get("state") === "RUNNING";
    const extra = running && base >= 0 ? (performance.now() - lastElapsedAt) / 1000 : 0;
    elapsed.textContent = base >= 0 ? fmt(base + extra) : "";
  }

  // A new status: draw it, and tick on from now.
  function update() {
    refresh();
    lastElapsedAt = performance.now();
    tick();
  }

  return { header, message, summary, update, tick };
}

// The controls bar (Cancel, Copy job id, Show script, Files; the rank filter, Follow/Pause and
// Jump to first error), the script and the Files tab (when the view has one).
function jobControls(model, filesPane) {
  const bar = h("div", "jt-controls");
  const cancelBtn = h("button", "jt-cancel", "Cancel");
  const copyBtn = h("button", "jt-copy", "Copy job id");
  const scriptBtn = h("button", "jt-script-toggle", "Show script");
  const filesBtn = h("button", "jt-files-toggle", "Files");
  const stacksBtn = h("button", "jt-stacks-take", "Stacks");
  stacksBtn.title = "every running rank's Python stack, taken at one moment and grouped by identical stack";
  const stacksPre = h("pre", "jt-stacks");
  stacksPre.hidden = true;
  const filesBox = h("div", "jt-files-box");
  filesBox.hidden = true;
  const files = filesPane ? filesPane({ model, box: filesBox }) : null;
  filesBtn.hidden = !files;
  const followBtn = h("button", "jt-follow", "Pause");
  const errorBtn = h("button", "jt-jump-error", "Jump to first error");
  errorBtn.disabled = true;
  const rankSelect = h("select", "jt-rank-filter");
  bar.append(cancelBtn, copyBtn, scriptBtn, filesBtn, stacksBtn, h("span", "jt-spacer"), rankSelect, followBtn,
             errorBtn);
  const scriptPre = h("pre", "jt-script");
  scriptPre.hidden = true;
  let confirmTimer = null;

  // Cancel asks once more ("Really cancel job N?") for five seconds; the second click cancels.
  cancelBtn.addEventListener("click", () => {
    if (cancelBtn.dataset.confirm !== "1") {
      cancelBtn.dataset.confirm = "1";
      cancelBtn.textContent = `Really cancel job ${model.get("job_id")}?`;
      confirmTimer = setTimeout(() => {
        cancelBtn.dataset.confirm = "";
        cancelBtn.textContent = "Cancel";
      }, 5000);
      return;
    }
    clearTimeout(confirmTimer);
    cancelBtn.dataset.confirm = "";
    cancelBtn.textContent = "Cancelling…";
    cancelBtn.disabled = true;
    model.send({ kind: "cancel" });
  });
  copyBtn.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(model.get("job_id"));
      copyBtn.textContent = "Copied";
    } catch {
      copyBtn.textContent = model.get("job_id");
    }
    setTimeout(() => { copyBtn.textContent = "Copy job id"; }, 1500);
  });
  scriptBtn.addEventListener("click", () => {
    scriptPre.hidden = !scriptPre.hidden;
    scriptBtn.textContent = scriptPre.hidden ? "Show script" : "Hide script";
  });
  // Stacks: one request for the whole job; the answer (text) replaces the last one.
  stacksBtn.addEventListener("click", () => {
    stacksBtn.disabled = true;
    stacksBtn.textContent = "Taking stacks…";
    model.send({ kind: "stacks" });
  });
  filesBtn.addEventListener("click", () => {
    filesBox.hidden = !filesBox.hidden;
    filesBtn.textContent = filesBox.hidden ? "Files" : "Hide files";
    if (!filesBox.hidden) files.shown();
  });

  // The Cancel button follows the job: off once it ended or a cancel was asked.
  function refreshCancel() {
    cancelBtn.disabled = model.get("terminal") || model.get("cancel_requested");
    if (model.get("terminal")) {
      clearTimeout(confirmTimer);
      cancelBtn.dataset.confirm = "";
      cancelBtn.textContent = "Cancel";
    } else if (model.get("cancel_requested")) {
      cancelBtn.textContent = "Cancelling…";
    }
  }

  // "all ranks", then one option per rank; `filter` is the rank shown.
  function refreshRankSelect(filter) {
    const n = model.get("world_size");
    if (rankSelect.options.length === n + 1) return;
    rankSelect.replaceChildren();
    const all = h("option", "", "all ranks");
    all.value = "-1";
    rankSelect.appendChild(all);
    for (let i = 0; i < n; i++) {
      const o = h("option", "", `rank ${i}`);
      o.value = String(i);
      rankSelect.appendChild(o);
    }
    rankSelect.value = String(filter);
  }

  function refreshScript() { scriptPre.textContent = model.get("script"); }

  // The Stacks button is off while stacks are being taken and once the job ended; the last
  // answer stays shown under the bar.
  function refreshStacks() {
    const busy = model.get("stacks_busy");
    stacksBtn.disabled = busy || model.get("terminal");
    stacksBtn.textContent = busy ? "Taking stacks…" : "Stacks";
    const text = model.get("stacks_text") || "";
    stacksPre.textContent = text;
    stacksPre.hidden = !text;
  }

  return { bar, scriptPre, filesBox, stacksPre, followBtn, errorBtn, rankSelect, refreshCancel, refreshRankSelect,
           refreshScript, refreshStacks };
}

// The rank grid: a legend (colours, counts, the first failure), one row per node, and the tip
// line under it. `filter()` is the rank the log shows; `onPick(i)` is called on a click on a rank.
function rankSection(model, filter, onPick) {
  const legend = h("div", "jt-legend");
  const grid = h("div", "jt-grid");
  const tip = h("div", "jt-tip");
  let hovered = -1; // the rank under the pointer, whose details the tip line shows
  const gridView = jtRankGrid(grid, legend, (i) => onPick(i), (i) => {
    hovered = i;
    refreshTip();
  });
  // "colour by use": running ranks shaded by how busy they are (GPU where known, else CPU).
  const useToggle = h("button", "jt-use-toggle", "colour by use");
  useToggle.title = "shade running ranks by their GPU (else CPU) utilisation; hover a rank or a node for the numbers";
  useToggle.setAttribute("aria-pressed", "false");
  useToggle.addEventListener("click", () => {
    const on = useToggle.getAttribute("aria-pressed") !== "true";
    useToggle.setAttribute("aria-pressed", String(on));
    grid.classList.toggle("jt-by-use", on);
  });
  legend.append(useToggle);

  function rankLabel(i, cell) {
    const [phase, node, code, sig] = cell;
    let text = `rank ${i} · ${node || "no node yet"} · ${PHASE_NAMES[phase] || phase}`;
    if (phase === "f") text += code === null || code === undefined ? ` (killed by signal ${sig})` : ` (exit ${code})`;
    if (phase === "s") text += ` (signal ${sig ?? 9})`;
    if (i === model.get("first_failure")) text += " · first failure";
    const use = jtUsageText(cell[4]);
    if (use) text += ` · ${use}`;
    return text;
  }

  function refresh() {
    const ranks = model.get("ranks");
    const first = model.get("first_failure");
    const cells = gridView.layout(ranks, model.get("nodelist"), model.get("ranks_per_node") || 0);
    ranks.forEach((cell, i) => {
      const node = cells[i];
      node.dataset.phase = cell[0];
      node.classList.toggle("jt-first-failure", i === first);
      node.classList.toggle("jt-selected", i === filter());
      node.title = rankLabel(i, cell);
      const level = jtUsageLevel(cell[4]);
      if (level === null) delete node.dataset.use;
      else node.dataset.use = String(Math.round(level * 100));
      node.style.setProperty("--jt-use", `${level === null ? 0 : Math.round(level * 100)}%`);
    });
    const totals = model.get("node_usage") || {};
    for (const line of grid.querySelectorAll(".jt-node")) {
      const label = line.querySelector(".jt-node-name");
      const use = jtUsageText(totals[line.dataset.node]);
      if (label) label.title = use ? `${line.dataset.node}: ${use} (its ranks together)` : line.dataset.node;
    }
    const f = first >= 0 && first < ranks.length ? ranks[first] : null;
    const why = f && (f[2] === null || f[2] === undefined ? `signal ${f[3]}` : `exit ${f[2]}`);
    gridView.refreshLegend(ranks, first, f ? `rank ${first}${f[1] ? " on " + f[1] : ""} (${why})` : "");
    refreshTip();
  }

  // The line under the grid: the hovered rank's details, else how many ranks are in each phase.
  function refreshTip() {
    const ranks = model.get("ranks");
    if (hovered >= 0 && hovered < ranks.length) {
      tip.textContent = rankLabel(hovered, ranks[hovered]);
      return;
    }
    const counts = {};
    for (const cell of ranks) counts[cell[0]] = (counts[cell[0]] || 0) + 1;
    const parts = Object.keys(PHASE_NAMES)
      .filter((p) => counts[p])
      .map((p) => `${counts[p]} ${PHASE_NAMES[p]}`);
    const noun = ranks.length === 1 ? "rank" : "ranks";
    tip.textContent = ranks.length ? `${ranks.length} ${noun}: ${parts.join(", ")}` : "";
    if (filter() >= 0) tip.textContent += ` · showing rank ${filter()} only (click it again for all)`;
  }

  // Brings rank i's cell into view.
  function reveal(i) {
    const cell = grid.querySelector(`.jt-rank[data-rank="${i}"]`);
    if (cell) cell.scrollIntoView({ block: "nearest", inline: "nearest" });
  }

  return { legend, grid, tip, refresh, reveal };
}

// One SVG chart per metric (metricsChart, when the view has charts; the lab panel has no
// metrics and draws none). The charts show the rank the log's filter shows (rank 0 for all
// ranks): one notion of "the rank I am looking at", so a click on a failed rank's cell brings
// its log and its curves.
function chartsSection(model, chart) {
  const el = h("div", "jt-metrics");
  const drawCharts = chart ? chart(el) : null;
  let chartRank = model.get("metrics_rank") || 0;

  function refresh() {
    if (!drawCharts) return;
    drawCharts(model.get("metrics"), { rank: model.get("metrics_rank") || 0, wanted: chartRank,
                                       note: model.get("metrics_note") || "" });
  }

  // The log now shows `rank` (-1: all): ask the kernel for that rank's metrics.
  function follow(rank) {
    const want = rank >= 0 ? rank : 0;
    if (!drawCharts || want === chartRank) return;
    chartRank = want;
    model.send({ kind: "metrics_rank", rank: want });
    refresh();
  }

  return { el, refresh, follow };
}

// A lines message carries raw log lines as one string ("R: " prefixes kept) and the indices
// of the lines the kernel flagged as errors; rows are built here, not one object per line in
// the kernel. Rows are [rank, text, isError, folded, mark] (rank null for the batch script's
// own lines; folded: one of the fail-stop's kill lines, mark: the failing rank's traceback starts).
function rowsFromText(text, errors, fold, marks) {
  const parts = text.split("\n");
  if (parts.length && parts[parts.length - 1] === "") parts.pop();
  const err = new Set(errors || []);
  const folded = new Set(fold || []);
  const marked = new Set(marks || []);
  return parts.map((raw, i) => {
    const line = raw.replace(/\r+$/, "");
    const m = RANK_RE.exec(line);
    const row = m ? [Number(m[1]), m[2], err.has(i)] : [null, line, err.has(i)];
    if (folded.has(i) || marked.has(i)) row.push(folded.has(i), marked.has(i));
    return row;
  });
}

// The log (the controls' Follow and Jump buttons drive it), the note on lines not sent, and the
// note on a reattached job's earlier log. `filter()` is the rank shown (-1: all).
function logSection(model, controls, filter) {
  const logBox = h("div", "jt-log");
  const skippedNote = h("div", "jt-skipped");
  const earlierNote = h("div", "jt-skipped jt-earlier");
  let skipped = 0;

  function lineNode(row) {
    const [rank, text, isError] = row;
    const div = h("div", "jt-line");
    if (isError) div.classList.add("jt-error");
    if (rank === null && RESTART_RE.test(text)) div.classList.add("jt-restart");
    div.appendChild(h("span", "jt-prefix", rank === null ? "  │ " : `${rank}: `));
    div.appendChild(h("span", "jt-text", text));
    return div;
  }

  const pane = jtLogPane({ model, logBox, followBtn: controls.followBtn, errorBtn: controls.errorBtn, lineNode,
                           visible: (row) => filter() < 0 || row[0] === filter(),
                           filtered: () => filter() >= 0, foldLabel: () => model.get("fold_label") });

  function receive(msg) {
    if (typeof msg.text === "string") msg.lines = rowsFromText(msg.text, msg.errors, msg.fold, msg.marks);
    skipped += msg.skipped || 0;
    skippedNote.textContent = skipped
      ? `${skipped} lines were not sent to the browser (too fast); %tiers logs ${model.get("job_id")} has them all`
      : "";
    pane.receive(msg.lines, msg.reset);
  }

  function refreshEarlier() {
    const bytes = model.get("log_skipped_bytes");
    earlierNote.textContent = bytes
      ? `reattached: the first ${(bytes / 1048576).toFixed(1)} MiB of the log are not shown; ` +
        `%tiers logs ${model.get("job_id")} has them`
      : "";
  }

  return { logBox, skippedNote, earlierNote, receive, redraw: pane.redraw, refreshEarlier };
}

// The view with its optional parts: `charts` (metrics_chart.js's metricsChart) and `files`
// (files_pane.js's jtFilesPane). The notebook widget has both (the default export); the lab
// panel has no metrics, so it leaves the charts out.
export function jobView({ charts = null, files = null } = {}) {
  function render({ model, el }) {
    const root = h("div", "jt-job");
    el.appendChild(root);
    let filter = -1; // the rank the log (and the grid's selection, and the charts) show; -1: all

    const head = jobHeader(model);
    const controls = jobControls(model, files);
    const rankGrid = rankSection(model, () => filter, pickRank);
    const chartView = chartsSection(model, charts);
    const log = logSection(model, controls, () => filter);
    root.append(head.header, head.message, controls.bar, controls.scriptPre, controls.filesBox, controls.stacksPre,
                rankGrid.legend,
                rankGrid.grid, rankGrid.tip, chartView.el, log.earlierNote, log.logBox, log.skippedNote,
                head.summary);

    function setFilter(rank) {
      filter = rank;
      controls.rankSelect.value = String(rank);
      chartView.follow(rank);
      rankGrid.refresh();
      log.redraw();
    }

    // A click on a rank (its cell or the first-failure button) shows only its log; again: all.
    function pickRank(i) {
      setFilter(filter === i ? -1 : i);
      if (filter === i) rankGrid.reveal(i);
    }

    function refreshHeader() {
      head.update();
      controls.refreshCancel();
      controls.refreshStacks();
    }
    const refreshRankSelect = () => controls.refreshRankSelect(filter);
    const ticker = setInterval(head.tick, 1000);

    model.on("msg:custom", (msg) => {
      if (!msg || msg.kind !== "lines") return;
      log.receive(msg);
    });
    controls.rankSelect.addEventListener("change", () => setFilter(Number(controls.rankSelect.value)));

    for (const name of HEADER_TRAITS) model.on(`change:${name}`, refreshHeader);
    for (const name of ["ranks", "nodelist", "ranks_per_node", "first_failure", "node_usage"]) {
      model.on(`change:${name}`, rankGrid.refresh);
    }
    model.on("change:world_size", refreshRankSelect);
    model.on("change:script", controls.refreshScript);
    for (const name of ["stacks_text", "stacks_busy"]) model.on(`change:${name}`, controls.refreshStacks);
    model.on("change:log_skipped_bytes", log.refreshEarlier);
    model.on("change:fold_label", () => log.redraw());
    for (const name of ["metrics", "metrics_rank", "metrics_note"]) model.on(`change:${name}`, chartView.refresh);

    refreshHeader();
    refreshRankSelect();
    rankGrid.refresh();
    controls.refreshScript();
    log.refreshEarlier();
    chartView.refresh();
    model.send({ kind: "hello" });
    const unseen = jtSeen(model);
    return () => {
      clearInterval(ticker);
      unseen();
    };
  }
  return { render };
}

// (pure: a host that takes only jobView, as the lab panel does, bundles no metric charts)
export default /* @__PURE__ */ jobView({ charts: metricsChart, files: jtFilesPane });
