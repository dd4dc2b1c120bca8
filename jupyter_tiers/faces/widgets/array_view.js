// jupyter-tiers ArrayView task table: one row per task of a job array. Everything from the
// cluster is set with textContent, never as HTML. A click on a row opens that task's own JobView
// below the table (made by the kernel: the job widget itself).

import { h } from "./view_common.js";

// A button that asks once more before it acts (the JobView's Cancel does the same).
function confirmButton(btn, label, question, act) {
  let timer = null;
  btn.addEventListener("click", (event) => {
    event.stopPropagation(); // not a row selection
    if (btn.dataset.confirm !== "1") {
      btn.dataset.confirm = "1";
      btn.textContent = question;
      timer = setTimeout(() => { btn.dataset.confirm = ""; btn.textContent = label; }, 5000);
      return;
    }
    clearTimeout(timer);
    btn.dataset.confirm = "";
    btn.textContent = "Cancelling…";
    btn.disabled = true;
    act();
  });
}

export function render({ model, el }) {
  const root = h("div", "jt-job jt-array");
  el.appendChild(root);
  const header = h("div", "jt-header");
  const title = h("span", "jt-title");
  const state = h("span", "jt-state");
  const counts = h("span", "jt-reason jt-counts");
  header.append(title, state, counts);
  const controls = h("div", "jt-controls");
  const cancelAll = h("button", "jt-cancel", "Cancel all");
  const hint = h("span", "jt-reason", "click a task for its ranks and log");
  controls.append(cancelAll, h("span", "jt-spacer"), hint);
  confirmButton(cancelAll, "Cancel all", "Really cancel every task?", () => model.send({ kind: "cancel" }));

  const table = h("table", "jt-tasks");
  const head = h("tr");
  for (const name of ["task", "parameters", "state", "elapsed", "last metric", "exit", ""]) {
    head.appendChild(h("th", "", name));
  }
  table.appendChild(h("thead")).appendChild(head);
  const body = h("tbody");
  table.appendChild(body);
  const summary = h("div", "jt-summary");
  const message = h("div", "jt-message");
  root.append(header, controls, message, table, summary);

  const rows = new Map(); // task index -> {tr, cells, cancel}

  function rowFor(index) {
    let row = rows.get(index);
    if (row) return row;
    const tr = h("tr", "jt-task");
    tr.dataset.task = String(index);
    const cells = [];
    for (let i = 0; i < 6; i++) {
      const td = h("td");
      tr.appendChild(td);
      cells.push(td);
    }
    const cancel = h("button", "jt-task-cancel", "Cancel");
    confirmButton(cancel, "Cancel", `Cancel task ${index}?`, () => model.send({ kind: "cancel_task", task: index }));
    tr.appendChild(h("td")).appendChild(cancel);
    tr.addEventListener("click", () => model.send({ kind: "select", task: index }));
    body.appendChild(tr);
    row = { tr, cells, cancel };
    rows.set(index, row);
    return row;
  }

  const ENDED = new Set(["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                         "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"]);

  function refresh() {
    const kind = model.get("sweep") ? "sweep" : "array";
    const limit = model.get("limit");
    title.textContent = `${kind} ${model.get("array_id")} · ${model.get("array_name")}` +
      (limit ? ` · at most ${limit} at once` : "");
    const st = model.get("state");
    state.textContent = st;
    state.dataset.state = st;
    counts.textContent = model.get("counts");
    summary.textContent = model.get("summary");
    message.textContent = model.get("message");
    if (!model.get("cancel_requested") && cancelAll.textContent === "Cancelling…") {
      cancelAll.textContent = "Cancel all"; // a refused cancel may be tried again
    }
    cancelAll.disabled = model.get("terminal") || model.get("cancel_requested");
    const selected = model.get("selected");
    for (const [index, label, taskState, elapsed, metric, exit] of model.get("tasks")) {
      const row = rowFor(index);
      const values = [String(index), model.get("sweep") ? label : "", taskState, elapsed, metric, exit];
      values.forEach((v, i) => { if (row.cells[i].textContent !== v) row.cells[i].textContent = v; });
      row.cells[2].className = "jt-task-state";
      row.cells[2].dataset.state = taskState;
      row.tr.dataset.state = taskState;
      row.tr.classList.toggle("jt-selected-task", index === selected);
      if (ENDED.has(taskState)) {
        row.cancel.disabled = true;
        row.cancel.textContent = "Cancel";
        row.cancel.dataset.confirm = "";
      } else if (row.cancel.disabled && model.get("message")) {
        row.cancel.disabled = false; // a refused cancel may be tried again
        row.cancel.textContent = "Cancel";
      }
    }
  }
  for (const name of ["tasks", "state", "counts", "summary", "terminal", "cancel_requested", "selected",
                      "message"]) {
    model.on(`change:${name}`, refresh);
  }
  refresh();
}

export default { render };
