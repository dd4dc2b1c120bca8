// JobView's rank grid: one row per node (its name, then one cell per rank on it), a legend of
// the phase colours with a count each, and the first failure as a button. The pure helpers
// (jtExpandHostlist, jtGroupRanks, jtCountPhases, jtCountText) come first, for tests. Every
// name from the cluster is set with textContent.

import { h } from "./view_common.js";

const JT_PHASES = [["w", "waiting"], ["r", "running"], ["x", "exited"], ["f", "failed"], ["s", "stopped"]];
const JT_MAX_NODES = 65536; // a hostlist never expands past this (a hostile "n[0-999999999]")

// Slurm hostlist -> names: "node[1-3,07-08],gpu1" -> node1 node2 node3 node07 node08 gpu1.
// At most `limit` names; anything it cannot read is taken as one literal name.
export function jtExpandHostlist(text, limit = JT_MAX_NODES) {
  const names = [];
  const parts = String(text || "").match(/[^,[]+(?:\[[^\]]*\])?[^,]*/g) || [];
  for (const part of parts) {
    const m = /^([^[]*)\[([^\]]*)\](.*)$/.exec(part);
    if (!m) {
      if (names.length < limit) names.push(part);
      continue;
    }
    const [, prefix, ranges, suffix] = m;
    for (const range of ranges.split(",")) {
      const r = /^(\d+)(?:-(\d+))?$/.exec(range);
      if (!r) {
        if (names.length < limit) names.push(`${prefix}[${range}]${suffix}`);
        continue;
      }
      const lo = Number(r[1]);
      const hi = r[2] === undefined ? lo : Number(r[2]);
      const width = r[1].startsWith("0") ? r[1].length : 0;
      for (let i = lo; i <= hi && names.length < limit; i++) {
        names.push(prefix + String(i).padStart(width, "0") + suffix);
      }
    }
  }
  return names;
}

// Ranks grouped into node rows: [{key, name, named, ranks: [i, ...]}], rows in the nodelist's
// order, then in the order of their first rank. A rank sits on the node its rank file names;
// one that has not started yet sits where Slurm's block distribution puts it (rank i on node
// floor(i / ranksPerNode) of the nodelist), and while there is no nodelist (PENDING) in an
// unnamed row "#k" of ranksPerNode ranks. Without ranksPerNode, unplaced ranks share one row.
export function jtGroupRanks(ranks, nodelist, ranksPerNode) {
  const n = ranks.length;
  const names = jtExpandHostlist(nodelist, Math.max(1, n));
  const perNode = ranksPerNode > 0 ? ranksPerNode : names.length ? Math.ceil(n / names.length) : 0;
  const order = new Map(names.map((name, k) => [name, k]));
  const rows = new Map();
  for (let i = 0; i < n; i++) {
    let name = ranks[i] && ranks[i][1] ? String(ranks[i][1]) : "";
    let key = name;
    const k = perNode ? Math.floor(i / perNode) : 0;
    if (!name && k < names.length) name = key = names[k];
    if (!name) key = "\u0000" + k;
    let row = rows.get(key);
    if (!row) {
      row = { key, name: name || `#${k + 1}`, named: Boolean(name), ranks: [], first: i };
      rows.set(key, row);
    }
    row.ranks.push(i);
  }
  const place = (row) => (order.has(row.key) ? order.get(row.key) : names.length);
  return [...rows.values()]
    .sort((a, b) => place(a) - place(b) || a.first - b.first)
    .map(({ key, name, named, ranks: members }) => ({ key, name, named, ranks: members }));
}

// How many ranks are in each phase: {w, r, x, f, s}.
export function jtCountPhases(ranks) {
  const counts = { w: 0, r: 0, x: 0, f: 0, s: 0 };
  for (const cell of ranks) if (cell && cell[0] in counts) counts[cell[0]]++;
  return counts;
}

// "250 running, 1 failed, 5 stopped": the phases that have ranks, in JT_PHASES order.
export function jtCountText(counts) {
  return JT_PHASES.filter(([p]) => counts[p]).map(([p, name]) => `${counts[p]} ${name}`).join(", ");
}

// A rank's latest usage [cpu %, RSS MiB, GPU util %, GPU MiB] (usage.py usage_cell) -> how busy
// it is, 0..1: its GPUs' utilisation where it has one, else its CPU (one core = 1); null without.
export function jtUsageLevel(usage) {
  if (!Array.isArray(usage)) return null;
  const [cpu, , gpu] = usage;
  const level = typeof gpu === "number" ? gpu / 100 : typeof cpu === "number" ? cpu / 100 : null;
  return level === null || !Number.isFinite(level) ? null : Math.max(0, Math.min(1, level));
}

function jtMib(mib) {
  return mib >= 1024 ? `${(mib / 1024).toFixed(1)} GiB` : `${Math.round(mib)} MiB`;
}

// The numbers of a rank's usage (or a node's totals), for tooltips: "CPU 97 % · RSS 1.2 GiB ·
// GPU 88 % · GPU mem 40.0 GiB" (the GPU parts only where the node has nvidia-smi); "" without.
export function jtUsageText(usage) {
  if (!Array.isArray(usage)) return "";
  const [cpu, rss, gpu, gmem] = usage;
  const parts = [];
  if (typeof cpu === "number") parts.push(`CPU ${Math.round(cpu)} %`);
  if (typeof rss === "number") parts.push(`RSS ${jtMib(rss)}`);
  if (typeof gpu === "number") parts.push(`GPU ${Math.round(gpu)} %`);
  if (typeof gmem === "number") parts.push(`GPU mem ${jtMib(gmem)}`);
  return parts.join(" · ");
}

// The grid's DOM: `grid` gets the node rows, `legend` the colour key, the counts and the first
// failure's button. `onPick(i)` is called when a rank (a cell or the first-failure button) is
// clicked, `onHover(i)` with the rank under the pointer (-1 when it leaves). Cells are made
// once per rank and moved between rows only when the grouping changes, so a status update of
// a 1,024-rank job touches attributes, not the tree.
export function jtRankGrid(grid, legend, onPick, onHover) {
  const cells = [];
  const columns = h("div", "jt-grid-cols"); // the rows in newspaper columns; `grid` scrolls them
  grid.replaceChildren(columns);
  let shape = "";
  const items = {};
  for (const [p, name] of JT_PHASES) {
    const item = h("span", "jt-legend-item");
    item.dataset.phase = p;
    item.title = `ranks ${name}`;
    const count = h("span", "jt-legend-count", "0");
    item.append(h("span", "jt-swatch"), count, document.createTextNode(` ${name}`));
    items[p] = { item, count };
  }
  const failure = h("button", "jt-first-failure-btn");
  failure.hidden = true;
  failure.addEventListener("click", () => onPick(Number(failure.dataset.rank)));
  legend.append(...JT_PHASES.map(([p]) => items[p].item), failure);

  function cell(i) {
    while (cells.length <= i) {
      const r = cells.length;
      const node = h("div", "jt-rank");
      node.dataset.rank = String(r);
      node.addEventListener("mouseenter", () => onHover(r));
      node.addEventListener("mouseleave", () => onHover(-1));
      node.addEventListener("click", () => onPick(r));
      cells.push(node);
    }
    return cells[i];
  }

  // Lays the ranks out in node rows; returns the cell element of every rank.
  function layout(ranks, nodelist, ranksPerNode) {
    const rows = jtGroupRanks(ranks, nodelist, ranksPerNode);
    const widest = rows.reduce((m, row) => Math.max(m, row.ranks.length), 0);
    const next = JSON.stringify(rows.map((row) => [row.name, row.ranks]));
    if (next !== shape) {
      shape = next;
      const longest = rows.reduce((m, row) => Math.max(m, row.name.length), 0);
      grid.style.setProperty("--jt-row-cells", String(Math.max(1, Math.min(16, widest))));
      // The names' column: the longest name in a 10 px monospace font, 4 to 16 characters.
      grid.style.setProperty("--jt-name", `${Math.max(4, Math.min(16, longest)) * 6 + 4}px`);
      cells.length = Math.min(cells.length, ranks.length);
      columns.replaceChildren(...rows.map((row) => {
        const line = h("div", "jt-node");
        line.dataset.node = row.name;
        const label = h("span", "jt-node-name", row.name);
        label.title = row.named ? `${row.name}: ranks ${row.ranks[0]}…${row.ranks[row.ranks.length - 1]}`
          : `not on a node yet (node ${row.name} of the allocation)`;
        if (!row.named) line.classList.add("jt-node-unplaced");
        const box = h("div", "jt-node-ranks");
        box.append(...row.ranks.map(cell));
        line.append(label, box);
        return line;
      }));
    }
    return ranks.map((_, i) => cell(i));
  }

  // The legend: every phase's colour and count, and the first failure (a button that picks it).
  function refreshLegend(ranks, first, firstLabel) {
    const counts = jtCountPhases(ranks);
    for (const [p] of JT_PHASES) {
      items[p].count.textContent = String(counts[p]);
      items[p].item.classList.toggle("jt-legend-zero", !counts[p]);
    }
    legend.hidden = !ranks.length;
    failure.hidden = !(first >= 0 && first < ranks.length);
    if (!failure.hidden) {
      failure.dataset.rank = String(first);
      failure.textContent = `first failure: ${firstLabel}`;
      failure.title = "show only this rank's log (click again for all)";
    }
  }

  return { layout, refreshLegend };
}
