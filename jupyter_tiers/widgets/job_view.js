// jupyter-tiers JobView front end. Everything from the cluster is set with textContent, never
// as HTML. Log lines arrive in batches as custom messages; the buffer is bounded by log_limit.
// h(), fmt() and jtLogPane() come from view_common.js, which job_view.py puts in front of this module, and
// jtRankGrid() (the node rows and legend) from rank_grid.js, put in front of it too.

const PHASE_NAMES = { w: "waiting", r: "running", x: "exited", f: "failed", s: "stopped" };
// The line the batch script writes when a requeued job starts again (requeue.py).
const RESTART_RE = /^— restart \d{1,6} —$/;

function render({ model, el }) {
  const root = h("div", "jt-job");
  el.appendChild(root);

  // Header: id, name, state, reason, elapsed, nodes
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
  header.append(title, state, restarts, reason, elapsed, nodes, checkpoint);
  const message = h("div", "jt-message");
  const summary = h("div", "jt-summary");

  // Controls
  const controls = h("div", "jt-controls");
  const cancelBtn = h("button", "jt-cancel", "Cancel");
  const copyBtn = h("button", "jt-copy", "Copy job id");
  const scriptBtn = h("button", "jt-script-toggle", "Show script");
  // The Files tab (files_pane.js, put in front of this module; the lab panel runs without it).
  const filesBtn = h("button", "jt-files-toggle", "Files");
  const filesBox = h("div", "jt-files-box");
  filesBox.hidden = true;
  const filesPane = typeof jtFilesPane === "function" ? jtFilesPane({ model, box: filesBox }) : null;
  filesBtn.hidden = !filesPane;
  const followBtn = h("button", "jt-follow", "Pause");
  const errorBtn = h("button", "jt-jump-error", "Jump to first error");
  errorBtn.disabled = true;
  const rankSelect = h("select", "jt-rank-filter");
  controls.append(cancelBtn, copyBtn, scriptBtn, filesBtn, h("span", "jt-spacer"), rankSelect, followBtn, errorBtn);

  const scriptPre = h("pre", "jt-script");
  scriptPre.hidden = true;

  // Rank grid: a legend (colours, counts, the first failure), then one row per node
  const legend = h("div", "jt-legend");
  const grid = h("div", "jt-grid");
  const tip = h("div", "jt-tip");
  const gridView = jtRankGrid(grid, legend, (i) => pickRank(i), (i) => {
    hovered = i;
    refreshTip();
  });

  // Log
  const logBox = h("div", "jt-log");
  const skippedNote = h("div", "jt-skipped");
  const earlierNote = h("div", "jt-skipped jt-earlier");
  // metrics_chart.js (put in front of this module by job_view.py) draws one SVG chart per
  // metric; the lab panel, which runs this view without it and has no metrics, draws none.
  const charts = h("div", "jt-metrics");
  const drawCharts = typeof metricsChart === "function" ? metricsChart(charts) : null;
  // The charts show the rank the log's filter shows (rank 0 for all ranks): one notion of "the
  // rank I am looking at", so a click on a failed rank's cell brings its log and its curves.
  let chartRank = model.get("metrics_rank") || 0;
  function refreshCharts() {
    if (!drawCharts) return;
    drawCharts(model.get("metrics"), { rank: model.get("metrics_rank") || 0, wanted: chartRank,
                                       note: model.get("metrics_note") || "" });
  }
  function chartsFollow(rank) {
    const want = rank >= 0 ? rank : 0;
    if (!drawCharts || want === chartRank) return;
    chartRank = want;
    model.send({ kind: "metrics_rank", rank: want });
    refreshCharts();
  }
  root.append(header, message, controls, scriptPre, filesBox, legend, grid, tip, charts, earlierNote, logBox, skippedNote, summary);

  function refreshEarlier() {
    const bytes = model.get("log_skipped_bytes");
    earlierNote.textContent = bytes
      ? `reattached: the first ${(bytes / 1048576).toFixed(1)} MiB of the log are not shown; ` +
        `%tiers logs ${model.get("job_id")} has them`
      : "";
  }

  let filter = -1;
  let skipped = 0;
  // performance.now(), not Date.now(): a wall clock stepped ±1 h must not tick the elapsed time.
  let lastElapsedAt = performance.now();
  let confirmTimer = null;
  let hovered = -1; // the rank under the pointer, whose details the tip line shows

  function refreshHeader() {
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
    message.textContent = model.get("message");
    summary.textContent = model.get("summary");
    cancelBtn.disabled = model.get("terminal") || model.get("cancel_requested");
    if (model.get("terminal")) {
      clearTimeout(confirmTimer);
      cancelBtn.dataset.confirm = "";
      cancelBtn.textContent = "Cancel";
    } else if (model.get("cancel_requested")) {
      cancelBtn.textContent = "Cancelling…";
    }
    lastElapsedAt = performance.now();
    tickElapsed();
  }

  function tickElapsed() {
    const base = model.get("elapsed_s");
    const running = model.get("state") === "RUNNING";
    const extra = running && base >= 0 ? Math.max(0, performance.now() - lastElapsedAt) / 1000 : 0;
    elapsed.textContent = base >= 0 ? fmt(base + extra) : "";
  }
  const ticker = setInterval(tickElapsed, 1000);

  function refreshRankSelect() {
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

  function rankLabel(i, cell) {
    const [phase, node, code, sig] = cell;
    let text = `rank ${i} · ${node || "no node yet"} · ${PHASE_NAMES[phase] || phase}`;
    if (phase === "f") text += code === null || code === undefined ? ` (killed by signal ${sig})` : ` (exit ${code})`;
    if (phase === "s") text += ` (signal ${sig ?? 9})`;
    if (i === model.get("first_failure")) text += " · first failure";
    return text;
  }

  function refreshGrid() {
    const ranks = model.get("ranks");
    const first = model.get("first_failure");
    const cells = gridView.layout(ranks, model.get("nodelist"), model.get("ranks_per_node") || 0);
    ranks.forEach((cell, i) => {
      const node = cells[i];
      node.dataset.phase = cell[0];
      node.classList.toggle("jt-first-failure", i === first);
      node.classList.toggle("jt-selected", i === filter);
      node.title = rankLabel(i, cell);
    });
    const f = first >= 0 && first < ranks.length ? ranks[first] : null;
    const why = f && (f[2] === null || f[2] === undefined ? `signal ${f[3]}` : `exit ${f[2]}`);
    gridView.refreshLegend(ranks, first, f ? `rank ${first}${f[1] ? " on " + f[1] : ""} (${why})` : "");
    refreshTip();
  }

  // A click on a rank (its cell or the first-failure button) shows only its log; again: all.
  function pickRank(i) {
    setFilter(filter === i ? -1 : i);
    const cell = grid.querySelector(`.jt-rank[data-rank="${i}"]`);
    if (cell && filter === i) cell.scrollIntoView({ block: "nearest", inline: "nearest" });
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
    if (filter >= 0) tip.textContent += ` · showing rank ${filter} only (click it again for all)`;
  }

  function lineNode(row) {
    const [rank, text, isError] = row;
    const div = h("div", "jt-line");
    if (isError) div.classList.add("jt-error");
    if (rank === null && RESTART_RE.test(text)) div.classList.add("jt-restart");
    div.appendChild(h("span", "jt-prefix", rank === null ? "  │ " : `${rank}: `));
    div.appendChild(h("span", "jt-text", text));
    return div;
  }

  function visible(row) {
    return filter < 0 || row[0] === filter;
  }

  // Rows are [rank, text, isError, folded, mark] (rank null for the batch script's own lines;
  // folded: one of the fail-stop's kill lines, mark: the failing rank's traceback starts).
  const logPane = jtLogPane({ model, logBox, followBtn, errorBtn, lineNode, visible,
                              filtered: () => filter >= 0, foldLabel: () => model.get("fold_label") });

  function setFilter(rank) {
    filter = rank;
    rankSelect.value = String(rank);
    chartsFollow(rank);
    refreshGrid();
    logPane.redraw();
  }

  // A lines message carries raw log lines as one string ("R: " prefixes kept) and the indices
  // of the lines the kernel flagged as errors; rows are built here, not one object per line in
  // the kernel. Same split as the kernel's split_log_line.
  const RANK_RE = /^(\d{1,7}): ?([\s\S]*)$/;
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

  model.on("msg:custom", (msg) => {
    if (!msg || msg.kind !== "lines") return;
    if (typeof msg.text === "string") msg.lines = rowsFromText(msg.text, msg.errors, msg.fold, msg.marks);
    skipped += msg.skipped || 0;
    skippedNote.textContent = skipped
      ? `${skipped} lines were not sent to the browser (too fast); %tiers logs ${model.get("job_id")} has them all`
      : "";
    logPane.receive(msg.lines, msg.reset);
  });

  rankSelect.addEventListener("change", () => setFilter(Number(rankSelect.value)));
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

  filesBtn.addEventListener("click", () => {
    filesBox.hidden = !filesBox.hidden;
    filesBtn.textContent = filesBox.hidden ? "Files" : "Hide files";
    if (!filesBox.hidden) filesPane.shown();
  });

  function refreshScript() { scriptPre.textContent = model.get("script"); }

  for (const name of ["state", "reason", "start_time", "elapsed_s", "nodelist", "message",
                      "summary", "terminal", "cancel_requested", "job_id", "job_name", "checkpoint",
                      "restarts"]) {
    model.on(`change:${name}`, refreshHeader);
  }
  model.on("change:ranks", refreshGrid);
  model.on("change:nodelist", refreshGrid);
  model.on("change:ranks_per_node", refreshGrid);
  model.on("change:first_failure", refreshGrid);
  model.on("change:world_size", refreshRankSelect);
  model.on("change:script", refreshScript);
  model.on("change:log_skipped_bytes", refreshEarlier);
  model.on("change:fold_label", () => logPane.redraw());
  for (const name of ["metrics", "metrics_rank", "metrics_note"]) model.on(`change:${name}`, refreshCharts);

  refreshHeader();
  refreshRankSelect();
  refreshGrid();
  refreshScript();
  refreshEarlier();
  refreshCharts();
  model.send({ kind: "hello" });
  return () => clearInterval(ticker);
}

export default { render };
