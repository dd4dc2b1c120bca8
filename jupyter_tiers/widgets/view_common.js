// Helpers shared by the jupyter-tiers views. The Python side puts this file in front of each
// view's module (anywidget loads one ES module per widget), so JobView and ServeView draw text
// and durations the same way.

function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

function fmt(seconds) {
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
function jtLogPane({ model, logBox, followBtn, errorBtn, lineNode, visible, filtered }) {
  let lines = [];
  let following = true;

  function markFirstError() {
    errorBtn.disabled = !logBox.querySelector(".jt-error");
  }

  function redraw() {
    logBox.replaceChildren(...lines.filter(visible).map(lineNode));
    markFirstError();
    if (following) logBox.scrollTop = logBox.scrollHeight;
  }

  function append(rows) {
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
