"""Issue 29 §7: ServeView's Warning events (widgets/serve_view.js) run by node on a small
stand-in DOM: the "ago" column ticks on from when the rows arrived (it read "×7 0s ago" a minute
later), and events of a pod that is gone are faded and say so."""

from __future__ import annotations

from typing import Any

from tests.unit.widget_js import run_module

FAKE_DOM = r"""
class El {
  constructor(tag) { this.tag = tag; this.children = []; this.textContent = ""; this.dataset = {};
                     this.className = ""; this.hidden = false; this.title = ""; }
  get lastChild() { return this.children[this.children.length - 1]; }
  appendChild(c) { this.children.push(c); return c; }
  append(...cs) { for (const c of cs) this.appendChild(c); }
  replaceChildren(...cs) { this.children = []; this.append(...cs); }
  addEventListener() {}
}
globalThis.document = { createElement: (t) => new El(t) };
let clock = 1000;
Object.defineProperty(globalThis, "performance", { value: { now: () => clock }, configurable: true });
"""


def run_js(body: str) -> Any:
    script = ('import { jtEventsSection } from "./serve_view.js";\n' + FAKE_DOM + body
              + "\nconsole.log(JSON.stringify(out));")
    return run_module(script, "serve events JS tests")


def test_event_ages_tick_and_gone_pods_fade() -> None:
    out = run_js("""
const rows = [["BackOff", "Pod/web-old", "Back-off restarting failed container", 7, 0, true],
              ["Unhealthy", "Pod/web-a", "Readiness probe failed", 1, 5, false]];
const model = { get: (k) => ({ events: rows })[k] };
const events = jtEventsSection(model);
events.refresh();
const list = events.el.children[1];
const ages = () => list.children.map((r) => r.lastChild.textContent);
const out = { first: ages() };
clock += 61_000;  // a minute later, no new status from the kernel
events.tick();
out.later = ages();
out.classes = list.children.map((r) => r.className);
out.objects = list.children.map((r) => r.children[1].textContent);
out.count = list.children[0].children[3].textContent;
""")
    assert out["first"] == ["0s ago", "5s ago"]
    assert out["later"] == ["61s ago", "66s ago"]
    assert out["classes"] == ["jt-event jt-event-gone", "jt-event"]
    assert out["objects"] == ["Pod/web-old (gone)", "Pod/web-a"]
    assert out["count"] == "×7"
