// The Files tab of JobView (files_pane.py is its kernel side): what the job left in its job and
// checkpoint directories, with a Download button per file into the notebook's directory.
// Names come from the cluster: set with textContent only. A local file with other content is
// never replaced silently: the kernel saves beside it ("saved as NAME (1).ext") and the row
// offers Replace, which asks first.

import { h } from "./view_common.js";

export function jtFilesPane({ model, box }) {
  const bar = h("div", "jt-files-bar");
  const refreshBtn = h("button", "jt-files-refresh", "Refresh");
  const note = h("span", "jt-files-note");
  bar.append(refreshBtn, note);
  const table = h("table", "jt-files");
  const head = h("tr");
  for (const label of ["name", "size", "modified", ""]) head.appendChild(h("th", "", label));
  const body = h("tbody");
  table.append(h("thead"), body);
  table.tHead.appendChild(head);
  // jupyter-tiers' own files (group "tiers": .jobid, rank.sh, job.sbatch...) are listed last,
  // behind a toggle: the job's outputs come first.
  const ownToggle = h("button", "jt-files-own-toggle", "");
  ownToggle.title = "the files jupyter-tiers wrote to run the job (.jobid, rank.sh, job.sbatch, …)";
  let showOwn = false;
  ownToggle.addEventListener("click", () => {
    showOwn = !showOwn;
    redraw();
  });
  box.append(bar, table, ownToggle);
  let asked = false;

  function size(n) {
    if (n >= 1e9) return (n / 1e9).toFixed(2) + " GB";
    if (n >= 1e6) return (n / 1e6).toFixed(1) + " MB";
    if (n >= 1e3) return (n / 1e3).toFixed(1) + " kB";
    return n + " B";
  }

  function when(t) {
    const d = new Date(t * 1000);
    return isNaN(d) ? "" : d.toLocaleString();
  }

  function redraw() {
    const downloads = model.get("downloads") || {};
    const listed = model.get("files") || [];
    // The kernel and the sidebar's server send the job's outputs first; a row without a group
    // (an older kernel) is an output.
    const own = listed.filter((row) => row[3] === "tiers");
    const shown = showOwn ? listed : listed.filter((row) => row[3] !== "tiers");
    ownToggle.hidden = own.length === 0;
    ownToggle.textContent = `${showOwn ? "Hide" : "Show"} jupyter-tiers' own files (${own.length})`;
    ownToggle.setAttribute("aria-expanded", String(showOwn));
    const rows = shown.map(([name, bytes, mtime, group]) => {
      const tr = h("tr", "jt-file");
      tr.dataset.name = name;
      tr.dataset.group = group || "output";
      const btn = h("button", "jt-download", "Download");
      btn.title = "download into the notebook's directory";
      btn.addEventListener("click", () => model.send({ kind: "download", name }));
      const said = downloads[name] || "";
      const status = h("span", "jt-download-status", said);
      const cell = h("td");
      cell.append(btn, status);
      if (said.startsWith("saved as ")) {
        const replace = h("button", "jt-download-replace", "Replace");
        replace.title = `replace ${name} in the notebook's directory with the job's file`;
        replace.addEventListener("click", () => {
          if (window.confirm(`Replace ${name} in the notebook's directory with the job's file? ` +
                             "Its current content is lost.")) {
            model.send({ kind: "download", name, overwrite: true });
          }
        });
        cell.appendChild(replace);
      }
      tr.append(h("td", "jt-file-name", name), h("td", "jt-file-size", size(bytes)),
                h("td", "jt-file-mtime", when(mtime)), cell);
      return tr;
    });
    body.replaceChildren(...rows);
    note.textContent = model.get("files_note") || "";
  }

  refreshBtn.addEventListener("click", () => model.send({ kind: "files" }));
  for (const name of ["files", "files_note", "downloads"]) model.on(`change:${name}`, redraw);
  redraw();
  return {
    // The first time the tab opens, list; later only on Refresh.
    shown() {
      if (!asked) {
        asked = true;
        model.send({ kind: "files" });
      }
    },
  };
}
