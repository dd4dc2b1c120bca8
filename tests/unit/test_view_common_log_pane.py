"""jtLogPane (widgets/view_common.js), the log pane JobView and ServeView share, run by node on a
small stand-in DOM: the buffer bounded by log_limit, the filter, Follow/Pause and the first error."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.helpers import loud_skip

WIDGETS = Path(__file__).resolve().parents[2] / "jupyter_tiers" / "widgets"

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
    node = shutil.which("node")
    if node is None:
        loud_skip("log pane JS tests", "node is not installed", fail_in_ci=False)
    src = FAKE_DOM + (WIDGETS / "view_common.js").read_text(encoding="utf-8") + SETUP + body
    res = subprocess.run([node, "-"], input=src + "\nconsole.log(JSON.stringify(out));",
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(res.stdout)


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
