"""jtLogPane (widgets/view_common.js), the log pane JobView and ServeView share, run by node on a
small stand-in DOM: the buffer bounded by log_limit, the filter, Follow/Pause and the first error."""

from __future__ import annotations

from typing import Any

from tests.unit.widget_js import run_module

# Just enough DOM for the pane: elements with children, classes, listeners and scrolling.
FAKE_DOM = r"""
class El {
  constructor(tag) { this.tag = tag; this.children = []; this.listeners = {}; this.textContent = "";
                     this.disabled = false; this.scrollTop = 0; this.cls = new Set(); this.parent = null;
                     this.flashed = false; this.seen = false;
                     this.classList = { add: (c) => this.cls.add(c), contains: (c) => this.cls.has(c) }; }
  set className(v) { this.cls = new Set(v.split(" ")); }
  get scrollHeight() { return 1000 + this.children.length; }
  get childElementCount() { return this.children.length; }
  get firstChild() { return this.children[0]; }
  appendChild(c) {
    for (const k of c.tag === "#frag" ? c.children : [c]) { k.parent = this; this.children.push(k); }
    return c;
  }
  append(...cs) { for (const c of cs) this.appendChild(c); }
  replaceChildren(...cs) { this.children = []; this.append(...cs); }
  remove() { this.parent.children.splice(this.parent.children.indexOf(this), 1); }
  querySelector(sel) { return this.children.find((c) => c.cls.has(sel.slice(1))) || null; }
  addEventListener(kind, fn) { this.listeners[kind] = fn; }
  click() { this.listeners.click(); }
  scrollIntoView() { this.seen = true; }
}
globalThis.document = { createElement: (t) => new El(t), createDocumentFragment: () => new El("#frag") };
"""

SETUP = r"""
const model = { get: (k) => ({ log_limit: 3 })[k] };
const logBox = new El("div"), followBtn = new El("button"), errorBtn = new El("button");
let filter = -1;
const lineNode = (row) => h("div", row[2] ? "jt-line jt-error" : "jt-line", `${row[0]}: ${row[1]}`);
const visible = (row) => filter < 0 || row[0] === filter;
const pane = jtLogPane({ model, logBox, followBtn, errorBtn, lineNode, visible,
                         filtered: () => filter >= 0 });
const shown = () => logBox.children.map((c) => c.textContent);
const out = {};
"""


def run_js(body: str) -> Any:
    script = ('import { h, jtLogPane } from "./view_common.js";\n' + FAKE_DOM + SETUP + body
              + "\nconsole.log(JSON.stringify(out));")
    return run_module(script, "log pane JS tests")


def test_the_buffer_keeps_the_last_log_limit_rows_and_a_filter_redraws_from_it() -> None:
    out = run_js("""
pane.receive([[0, "a", false], [1, "b", false]], false);
pane.receive([[0, "c", false], [1, "d", true]], false);
out.all = shown();
out.errorEnabled = !errorBtn.disabled;
out.followed = logBox.scrollTop === logBox.scrollHeight;
filter = 0; pane.redraw();
out.rank0 = shown();
pane.receive([[0, "e", false], [0, "f", false]], false);  // drops rows: the pane redraws
out.rank0After = shown();
out.errorEnabledAfter = !errorBtn.disabled;
filter = -1; pane.redraw();
out.allAfter = shown();
pane.receive([[1, "x", false], [1, "y", false], [1, "z", false], [1, "w", false]], true);
out.reset = shown();
""")
    assert out["all"] == ["1: b", "0: c", "1: d"]
    assert out["errorEnabled"] and out["followed"]
    assert out["rank0"] == ["0: c"]
    assert out["rank0After"] == ["0: e", "0: f"]  # "c" fell out of the buffer
    assert not out["errorEnabledAfter"]
    assert out["allAfter"] == ["1: d", "0: e", "0: f"]
    assert out["reset"] == ["1: y", "1: z", "1: w"]


def test_pause_stops_following_and_jump_to_first_error_pauses_too() -> None:
    out = run_js("""
pane.receive([[0, "a", false]], false);
followBtn.click();
out.label = followBtn.textContent;
logBox.scrollTop = 0;
pane.receive([[0, "b", true]], false);
out.stayed = logBox.scrollTop === 0;
followBtn.click();
out.labelAgain = followBtn.textContent;
out.backAtEnd = logBox.scrollTop === logBox.scrollHeight;
errorBtn.click();
out.afterJump = followBtn.textContent;
const first = logBox.querySelector(".jt-error");
out.flashed = first.cls.has("jt-flash") && first.seen;
""")
    assert out == {"label": "Follow", "stayed": True, "labelAgain": "Pause", "backAtEnd": True,
                   "afterJump": "Follow", "flashed": True}


FOLD_SETUP = r"""
let label = "";
const fmodel = { get: (k) => ({ log_limit: 100 })[k] };
const fbox = new El("div"), ffollow = new El("button"), ferror = new El("button");
let ffilter = -1;
const fpane = jtLogPane({ model: fmodel, logBox: fbox, followBtn: ffollow, errorBtn: ferror, lineNode,
                          visible: (row) => ffilter < 0 || row[0] === ffilter,
                          filtered: () => ffilter >= 0, foldLabel: () => label });
const text = (c) => c.children.length ? c.children.map(text).join("") : c.textContent;
const fshown = () => fbox.children.map(text);
const foldNode = () => fbox.children.find((c) => c.cls.has("jt-fold"));
const KILL = (node, tasks) =>
  [null, `srun: error: ${node}: tasks ${tasks}: Exited with exit code 143`, true, true, false];
"""


def test_the_fail_stop_kill_lines_fold_into_one_line_before_the_failing_ranks_traceback() -> None:
    out = run_js(FOLD_SETUP + """
const rows = [
  [0, "step 30", false],
  [137, "Traceback (most recent call last):", true, false, true],
  [137, "RuntimeError: boom", true],
  KILL("node1", "0-7"),
  [null, "srun: error: node18: task 137: Exited with exit code 7", true],
  KILL("node2", "8-15"),
];
fpane.receive(rows, false);
out.noLabel = fshown();  // no failure known yet: every line as it is
label = "16 ranks stopped by fail-stop after rank 137 (node18) failed";
fpane.redraw();
out.folded = fshown();
out.title = foldNode().children[2].title;
out.firstError = text(fbox.querySelector(".jt-error"));
fpane.receive([KILL("node3", "16-23"), [5, "late line", false]], false);
out.more = fshown();
foldNode().children[2].click();
out.expanded = fshown();
foldNode().children[2].click();
out.collapsed = fshown().length;
ffilter = 137; fpane.redraw();
out.rank137 = fshown();
""")
    fold = "  │ 16 ranks stopped by fail-stop after rank 137 (node18) failed — show"
    assert out["noLabel"][3] == "null: srun: error: node1: tasks 0-7: Exited with exit code 143"
    assert len(out["noLabel"]) == 6
    assert out["folded"] == ["0: step 30", fold, "137: Traceback (most recent call last):",
                             "137: RuntimeError: boom",
                             "null: srun: error: node18: task 137: Exited with exit code 7"]
    assert out["title"] == "2 Slurm lines of the fail-stop's kills"
    assert out["firstError"] == "137: Traceback (most recent call last):"
    assert out["more"][1] == fold and out["more"][-1] == "5: late line" and len(out["more"]) == 6
    assert out["expanded"][1] == fold.replace("— show", "— hide")
    assert out["expanded"][4] == "null: srun: error: node1: tasks 0-7: Exited with exit code 143"
    assert len(out["expanded"]) == 9 and out["collapsed"] == 6
    assert out["rank137"] == ["137: Traceback (most recent call last):", "137: RuntimeError: boom"]


def test_without_a_traceback_the_fold_line_stands_where_the_first_kill_line_was() -> None:
    out = run_js(FOLD_SETUP + """
label = "8 ranks stopped by fail-stop after rank 3 (node1) failed";
fpane.receive([[3, "NCCL watchdog timeout", false], KILL("node2", "8-15")], false);
fpane.receive([[null, "jupyter-tiers: done", false]], false);
out.shown = fshown();
""")
    assert out["shown"] == ["3: NCCL watchdog timeout",
                            "  │ 8 ranks stopped by fail-stop after rank 3 (node1) failed — show",
                            "null: jupyter-tiers: done"]
