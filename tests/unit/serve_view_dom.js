// A stand-in DOM just big enough for serveView({}).render, then the pod rows and header as JSON
// (tests/unit/test_serve_view_canary.py puts the traits in place of __TRAITS__).
class El {
  constructor(tag) { this.tag = tag; this.children = []; this.listeners = {}; this._text = ""; this.dataset = {};
    this.style = {}; this.hidden = false; this.disabled = false; this.title = ""; this.value = ""; this.cls = new Set();
    this.scrollTop = 0; this.parent = null;
    this.classList = { add: (c) => this.cls.add(c), remove: (c) => this.cls.delete(c),
      contains: (c) => this.cls.has(c), toggle: (c, on) => { if (on === undefined ? !this.cls.has(c) : on) this.cls.add(c); else this.cls.delete(c); } }; }
  set className(v) { this.cls = new Set(v.split(" ").filter(Boolean)); }
  get className() { return [...this.cls].join(" "); }
  set textContent(v) { this._text = String(v); this.children = []; }
  get textContent() { return this._text + this.children.map((c) => c.textContent).join(""); }
  get options() { return this.children; }
  get scrollHeight() { return 1000; }
  get clientHeight() { return 100; }
  get childElementCount() { return this.children.length; }
  get firstChild() { return this.children[0]; }
  get lastChild() { return this.children[this.children.length - 1]; }
  appendChild(c) { for (const k of c.tag === "#frag" ? c.children : [c]) { k.parent = this; this.children.push(k); } return c; }
  append(...cs) { for (const c of cs) this.appendChild(typeof c === "string" ? Object.assign(new El("#text"), { _text: c }) : c); }
  replaceChildren(...cs) { this.children = []; this.append(...cs); }
  remove() { if (this.parent) this.parent.children.splice(this.parent.children.indexOf(this), 1); }
  removeAttribute() {} setAttribute() {}
  addEventListener(kind, fn) { this.listeners[kind] = fn; }
  all(cls) { const out = []; const walk = (e) => { for (const c of e.children) { if (c.cls.has(cls)) out.push(c); walk(c); } }; walk(this); return out; }
  querySelector(sel) { return this.all(sel.slice(1))[0] || null; }
  querySelectorAll(sel) { return this.all(sel.slice(1)); }
  scrollIntoView() {}
}
globalThis.document = { createElement: (t) => new El(t), createDocumentFragment: () => new El("#frag") };
const { serveView } = await import("./serve_view.js");
const traits = __TRAITS__;
const model = { on() {}, off() {}, send() {}, get: (k) => traits[k] };
const el = new El("div");
const stop = serveView({}).render({ model, el });
const rows = el.all("jt-pod").map((r) => {
  const cell = r.querySelector(".jt-pod-track");
  return [r.dataset.pod, cell ? cell.textContent : null, cell ? !cell.hidden : false, r.cls.has("jt-canary-pod")];
});
console.log(JSON.stringify({ header: el.all("jt-ready-count")[0].textContent, rows }));
if (typeof stop === "function") stop();
