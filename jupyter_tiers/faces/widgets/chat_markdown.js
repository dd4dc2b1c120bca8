// A model's answer in Try it, as Markdown, built as DOM nodes whose text is set with textContent:
// never innerHTML of model text. The notebook widget cannot reach JupyterLab's own sanitising
// Markdown renderer (anywidget gives a view no rendermime) and the sidebar has no Try it (no
// kernel), so this renders a safe subset itself: fenced code blocks (also an unclosed one, as a
// streamed answer has), headings, lists, block quotes, rules, paragraphs; inline code, bold,
// italic, and links to http(s) only. Anything else stays as the text it is.
// jtMarkdownBlocks and jtInlines are pure (node tests them); jtRenderMarkdown builds the nodes.

import { h } from "./view_common.js";

// Each pattern is linear in its line: no two quantifiers can share a character where a failed
// match would make them trade it back and forth (those took seconds on one long line, and a
// streamed answer is parsed again at each piece). A fence's run is taken whole (the lookahead
// and back reference: JS has no possessive quantifier) and the rest checked for a backtick once.
const FENCE = /^ {0,3}(?=(`{3,}|~{3,}))\1(?![^`]*`)\s*([^`\s]*)/;
const HEADING = /^ {0,3}(#{1,6})\s+/; // its text: headingText
const ITEM = /^ {0,3}([-*+]|\d{1,9}[.)])\s+(\S.*|)$/;
const LINE_END = /[\r\u2028\u2029]/; // what "." does not match, besides "\n"
const QUOTE = /^ {0,3}>\s?(.*)$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
// More than this many characters are shown as plain text (a re-parse per streamed piece).
export const JT_MD_MAX = 100000;

// The blocks of `text`: {type: "code", lang, text, open} | {type: "heading", level, text} |
// {type: "list", ordered, start, items: [text]} | {type: "quote", text} | {type: "rule"} |
// {type: "para", text}.
export function jtMarkdownBlocks(text) {
  const lines = String(text ?? "").replace(/\r\n?/g, "\n").split("\n");
  const blocks = [];
  let para = null;
  let list = null;
  const flush = () => {
    if (para) blocks.push({ type: "para", text: para.join("\n") });
    para = null;
    list = null;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = FENCE.exec(line);
    if (fence) {
      flush();
      const mark = fence[1];
      const body = [];
      let open = true;
      for (i++; i < lines.length; i++) {
        const close = lines[i].trim();
        if (close.length >= mark.length && close === mark[0].repeat(close.length)) {
          open = false;
          break;
        }
        body.push(lines[i]);
      }
      blocks.push({ type: "code", lang: fence[2].slice(0, 40), text: body.join("\n"), open });
      continue;
    }
    if (!line.trim()) {
      flush();
      continue;
    }
    const heading = HEADING.exec(line);
    const title = heading && headingText(line.slice(heading[0].length));
    if (title !== null) {
      flush();
      blocks.push({ type: "heading", level: heading[1].length, text: title });
      continue;
    }
    if (RULE.test(line)) {
      flush();
      blocks.push({ type: "rule" });
      continue;
    }
    const item = ITEM.exec(line);
    if (item) {
      const ordered = /\d/.test(item[1]);
      if (para) flush();
      if (!list || list.ordered !== ordered) {
        list = { type: "list", ordered, start: ordered ? parseInt(item[1], 10) : 1, items: [] };
        blocks.push(list);
      }
      list.items.push(item[2]);
      continue;
    }
    if (list && /^\s+\S/.test(line)) { // an item's next line
      list.items[list.items.length - 1] += "\n" + line.trim();
      continue;
    }
    const quote = QUOTE.exec(line);
    if (quote) {
      flush();
      const last = blocks[blocks.length - 1];
      if (last && last.type === "quote" && i > 0 && QUOTE.test(lines[i - 1])) last.text += "\n" + quote[1];
      else blocks.push({ type: "quote", text: quote[1] });
      continue;
    }
    list = null;
    (para = para || []).push(line);
  }
  flush();
  return blocks;
}

// A heading's text after "# ": without its closing run of #s and the spaces around it, or null
// when a line end is left in it (as /(.*?)\s*#*\s*$/ would have it: that lazy group tried
// the tail at each character, cubic on a run of spaces).
function headingText(rest) {
  let end = rest.trimEnd().length;
  while (end > 0 && rest[end - 1] === "#") end--;
  const text = rest.slice(0, end).trimEnd();
  return LINE_END.test(text) ? null : text;
}

// Each run stays on one line and within 500 characters: a text full of unclosed markers costs
// a bounded scan per character, not one to the end of the text. Code spans are found by codeSpan
// below, not by a pattern: `(`+)...\1` began a match at every backtick of a run and took the rest
// of the run each time (quadratic in a long run of backticks).
const INLINE = new RegExp([
  /\*\*(?=\S)([^\n]{0,500}?\S)\*\*/.source, // bold
  /__(?=\S)([^\n]{0,500}?\S)__(?![A-Za-z0-9])/.source,
  /\*(?=[^\s*])([^*\n]{0,500}?[^\s*])\*/.source, // italic
  /(?<![A-Za-z0-9])_(?=[^\s_])([^_\n]{0,500}?[^\s_])_(?![A-Za-z0-9])/.source,
  /\[([^\]\n]{1,500})\]\(([^()\s]{1,2000})\)/.source, // a link
].join("|"), "g");
const CODE_WINDOW = 502; // the most characters a code span holds

// The first code span starting at or after `from`: {index, end, text}, or null. A span opens
// with a run of backticks and closes with a run of exactly as many within CODE_WINDOW characters
// on the same line; an opening run's first backticks may stay text ("``a`" is "`" and code "a"),
// and the longest closing run that fits wins, the first of that length, as the pattern
// /(`+)([^`\n]|[^`\n][^\n]{0,500}?[^`\n])\1(?!`)/ found. Each run is scanned once and its
// window at most once: linear in the text.
export function jtCodeSpan(src, from) {
  for (let s = src.indexOf("`", from); s >= 0; s = src.indexOf("`", s)) {
    let e = s;
    while (src[e] === "`") e++;
    const want = e - s;
    let best = 0;
    let bestAt = -1;
    const last = Math.min(src.length - 1, e + CODE_WINDOW);
    if (e < src.length && src[e] !== "\n") {
      for (let c = e + 1; c <= last && best < want;) {
        if (src[c] === "\n") break;
        if (src[c] !== "`") {
          c++;
          continue;
        }
        let f = c;
        while (src[f] === "`" && f - c <= want) f++;
        const r = f - c;
        if (r <= want && src[f] !== "`" && r > best) {
          best = r;
          bestAt = c;
        }
        while (f <= last && src[f] === "`") f++; // past a run longer than the opening one
        c = f;
      }
    }
    if (best) return { index: e - best, end: bestAt + best, text: src.slice(e, bestAt) };
    s = e;
  }
  return null;
}

// The inline runs of one block's text: {t: "text"|"code"|"b"|"i", text} and {t: "a", text, href}
// (href only an http(s) URL; any other link stays text with its target after it).
export function jtInlines(text) {
  const src = String(text ?? "");
  const out = [];
  let at = 0;
  const push = (run) => {
    const last = out[out.length - 1];
    if (run.t === "text" && last && last.t === "text") last.text += run.text;
    else if (run.text !== "") out.push(run);
  };
  // The next code span and the next other run at or after `at`, each found again only once `at`
  // has passed it (no match begins between where a search began and what it found).
  let code;
  let other;
  for (;;) {
    if (code === undefined || (code && code.index < at)) code = jtCodeSpan(src, at);
    if (other === undefined || (other && other.index < at)) {
      INLINE.lastIndex = at;
      other = INLINE.exec(src);
    }
    if (!code && !other) break;
    const m = code && (!other || code.index < other.index) ? code : other;
    if (m.index > at) push({ t: "text", text: src.slice(at, m.index) });
    if (m === code) {
      push({ t: "code", text: code.text.replace(/^ (.*) $/s, "$1") });
      at = code.end;
      continue;
    }
    if (m[1] !== undefined || m[2] !== undefined) push({ t: "b", text: m[1] ?? m[2] });
    else if (m[3] !== undefined || m[4] !== undefined) push({ t: "i", text: m[3] ?? m[4] });
    else {
      const href = jtSafeHref(m[6]);
      if (href) push({ t: "a", text: m[5], href });
      else push({ t: "text", text: `${m[5]} (${m[6]})` });
    }
    at = m.index + m[0].length;
  }
  if (at < src.length) push({ t: "text", text: src.slice(at) });
  return out;
}

// `url` when it is an absolute http(s) URL, else "" (no javascript:, data:, relative paths).
export function jtSafeHref(url) {
  if (!/^https?:\/\//i.test(String(url))) return "";
  try {
    const parsed = new URL(url);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : "";
  } catch {
    return "";
  }
}

function inlineNodes(parent, text) {
  for (const run of jtInlines(text)) {
    if (run.t === "text") parent.appendChild(document.createTextNode(run.text));
    else if (run.t === "code") parent.appendChild(h("code", "jt-md-inline-code", run.text));
    else if (run.t === "b") parent.appendChild(h("strong", "", run.text));
    else if (run.t === "i") parent.appendChild(h("em", "", run.text));
    else {
      const a = h("a", "jt-md-link", run.text);
      a.href = run.href;
      a.target = "_blank";
      a.rel = "noopener noreferrer nofollow";
      a.title = run.href;
      parent.appendChild(a);
    }
  }
}

// Fills `node` with `text` rendered; `copy(text)` copies a code block (its button's click).
export function jtRenderMarkdown(node, text, copy) {
  node.replaceChildren();
  if (String(text).length > JT_MD_MAX) {
    node.appendChild(h("div", "jt-md-plain", String(text)));
    return;
  }
  for (const block of jtMarkdownBlocks(text)) {
    if (block.type === "code") {
      const wrap = h("div", "jt-md-codeblock");
      const bar = h("div", "jt-md-codebar");
      bar.appendChild(h("span", "jt-md-lang", block.lang || "code"));
      if (copy) {
        const btn = h("button", "jt-md-copy", "Copy");
        btn.title = "copy this code";
        btn.addEventListener("click", () => copy(block.text, btn));
        bar.appendChild(btn);
      }
      const pre = h("pre", "jt-md-code");
      const code = h("code", "", block.text);
      if (block.lang) code.dataset.lang = block.lang;
      pre.appendChild(code);
      wrap.append(bar, pre);
      node.appendChild(wrap);
    } else if (block.type === "heading") {
      const el = h(`h${Math.min(6, block.level + 2)}`, "jt-md-heading");
      inlineNodes(el, block.text);
      node.appendChild(el);
    } else if (block.type === "list") {
      const el = h(block.ordered ? "ol" : "ul", "jt-md-list");
      if (block.ordered && block.start !== 1) el.start = block.start;
      for (const item of block.items) {
        const li = h("li", "");
        inlineNodes(li, item);
        el.appendChild(li);
      }
      node.appendChild(el);
    } else if (block.type === "quote") {
      const el = h("blockquote", "jt-md-quote");
      inlineNodes(el, block.text);
      node.appendChild(el);
    } else if (block.type === "rule") {
      node.appendChild(h("hr", "jt-md-rule"));
    } else {
      const el = h("p", "jt-md-para");
      inlineNodes(el, block.text);
      node.appendChild(el);
    }
  }
}
