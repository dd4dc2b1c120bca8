// Helpers shared by the jupyter-tiers views (an ES module the views import), so JobView and
// ServeView draw text, durations and their logs the same way.

export function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

export function fmt(seconds) {
  if (seconds < 0) return "--:--:--";
  const d = Math.floor(seconds / 86400);
  const hh = String(Math.floor((seconds % 86400) / 3600)).padStart(2, "0");
  const mm = String(Math.floor((seconds % 3600) / 60)).padStart(2, "0");
  const ss = String(Math.floor(seconds % 60)).padStart(2, "0");
  return (d ? d + "-" : "") + `${hh}:${mm}:${ss}`;
}

// The log pane of JobView and ServeView: a buffer of rows [source, text, isError] bounded by
// log_limit, the rows visible(row) lets through drawn by lineNode(row), Follow/Pause and Jump to
// first error. filtered() tells whether visible() hides any source (then a trim redraws).
// receive(rows, reset) takes a batch; redraw() draws again after the filter changed.
// Fail-stop folding (JobView): a row [source, text, isError, folded, mark] with folded set is one
// of the fail-stop's kill lines; while foldLabel() says something, the shown ones are drawn as one
// line "LABEL — show" (a click shows them in place; again: hides), put before the last shown
// mark (the failing rank's traceback), else where the first of them was.
export function jtLogPane({ model, logBox, followBtn, errorBtn, lineNode, visible, filtered, foldLabel }) {
  let lines = [];
  let following = true;
  let expanded = false;
  let folding = false; // whether the pane draws a fold line now (then every batch redraws)

  function markFirstError() {
    errorBtn.disabled = !logBox.querySelector(".jt-error");
  }

  function foldNode(count) {
    const node = h("div", "jt-line jt-fold");
    node.appendChild(h("span", "jt-prefix", "  │ "));
    node.appendChild(h("span", "jt-text", `${foldLabel()} — `));
    const btn = h("button", "jt-fold-toggle", expanded ? "hide" : "show");
    btn.title = `${count} Slurm line${count === 1 ? "" : "s"} of the fail-stop's kills`;
    btn.addEventListener("click", () => {
      expanded = !expanded;
      redraw();
    });
    node.appendChild(btn);
    return node;
  }

  function drawn() {
    const shown = lines.filter(visible);
    const label = foldLabel ? foldLabel() : "";
    const count = label ? shown.filter((row) => row[3]).length : 0;
    folding = count > 0;
    if (!folding) return shown.map(lineNode);
    let at = -1;
    for (let i = shown.length - 1; i >= 0 && at < 0; i--) if (shown[i][4]) at = i;
    if (at < 0) at = shown.findIndex((row) => row[3]);
    const nodes = [];
    shown.forEach((row, i) => {
      if (i === at) nodes.push(foldNode(count));
      if (expanded || !row[3]) nodes.push(lineNode(row));
    });
    return nodes;
  }

  function redraw() {
    logBox.replaceChildren(...drawn());
    markFirstError();
    if (following) logBox.scrollTop = logBox.scrollHeight;
  }

  function append(rows) {
    if (folding || rows.some((row) => row[3] || row[4])) {
      const limit = model.get("log_limit");
      lines.push(...rows);
      if (lines.length > limit) lines = lines.slice(lines.length - limit);
      redraw();
      return;
    }
    const limit = model.get("log_limit");
    lines.push(...rows);
    let dropped = 0;
    if (lines.length > limit) {
      dropped = lines.length - limit;
      lines = lines.slice(dropped);
    }
    const frag = document.createDocumentFragment();
    for (const row of rows) if (visible(row)) frag.appendChild(lineNode(row));
    logBox.appendChild(frag);
    while (logBox.childElementCount > limit) logBox.firstChild.remove();
    if (dropped && filtered()) redraw();
    markFirstError();
    if (following) logBox.scrollTop = logBox.scrollHeight;
  }

  function receive(rows, reset) {
    if (reset) {
      lines = rows.slice(-model.get("log_limit"));
      redraw();
    } else {
      append(rows);
    }
  }

  // A pane filled while hidden (a background tab, a collapsed output) has nothing to scroll:
  // once it gets its size, it follows the end as it would have.
  if (typeof ResizeObserver !== "undefined") {
    new ResizeObserver(() => {
      if (following) logBox.scrollTop = logBox.scrollHeight;
    }).observe(logBox);
  }

  followBtn.addEventListener("click", () => {
    following = !following;
    followBtn.textContent = following ? "Pause" : "Follow";
    if (following) logBox.scrollTop = logBox.scrollHeight;
  });
  errorBtn.addEventListener("click", () => {
    const first = logBox.querySelector(".jt-error");
    if (!first) return;
    following = false;
    followBtn.textContent = "Follow";
    first.scrollIntoView({ block: "center" });
    first.classList.add("jt-flash");
  });

  return { receive, redraw };
}

// A rendered view tells its kernel every 60 s that a page shows it; a kernel whose view went
// unseen for a while (the browser closed) stops sending its updates, so the server can go idle
// and a hub's culler stop it (view_common.py's SeenGate). Returns the stop function.
export const SEEN_MS = 60000;
export function jtSeen(model) {
  const every = setInterval(() => model.send({ kind: "seen" }), SEEN_MS);
  return () => clearInterval(every);
}
