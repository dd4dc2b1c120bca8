// chat_markdown.js as it was before issue 36 §4 (its pure part: no DOM), kept as the reference the
// linear rewrite is compared with (tests/hardening/test_linear_chat_markdown.py). Quadratic and
// worse on long lines: feed it short texts only.

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const ITEM = /^ {0,3}([-*+]|\d{1,9}[.)])\s+(.*)$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
// More than this many characters are shown as plain text (a re-parse per streamed piece).
const JT_MD_MAX = 100000;

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
    if (heading) {
      flush();
      blocks.push({ type: "heading", level: heading[1].length, text: heading[2] });
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

// Each run stays on one line and within 500 characters: a text full of unclosed markers costs
// a bounded scan per character, not one to the end of the text.
const INLINE = new RegExp([
  /(`+)([^`\n]|[^`\n][^\n]{0,500}?[^`\n])\1(?!`)/.source, // code
  /\*\*(?=\S)([^\n]{0,500}?\S)\*\*/.source, // bold
  /__(?=\S)([^\n]{0,500}?\S)__(?![A-Za-z0-9])/.source,
  /\*(?=[^\s*])([^*\n]{0,500}?[^\s*])\*/.source, // italic
  /(?<![A-Za-z0-9])_(?=[^\s_])([^_\n]{0,500}?[^\s_])_(?![A-Za-z0-9])/.source,
  /\[([^\]\n]{1,500})\]\(([^()\s]{1,2000})\)/.source, // a link
].join("|"), "g");

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
  INLINE.lastIndex = 0;
  for (let m = INLINE.exec(src); m; m = INLINE.exec(src)) {
    if (m.index > at) push({ t: "text", text: src.slice(at, m.index) });
    if (m[1] !== undefined) push({ t: "code", text: m[2].replace(/^ (.*) $/s, "$1") });
    else if (m[3] !== undefined || m[4] !== undefined) push({ t: "b", text: m[3] ?? m[4] });
    else if (m[5] !== undefined || m[6] !== undefined) push({ t: "i", text: m[5] ?? m[6] });
    else {
      const href = jtSafeHref(m[8]);
      if (href) push({ t: "a", text: m[7], href });
      else push({ t: "text", text: `${m[7]} (${m[8]})` });
    }
    at = INLINE.lastIndex;
  }
  if (at < src.length) push({ t: "text", text: src.slice(at) });
  return out;
}

// `url` when it is an absolute http(s) URL, else "" (no javascript:, data:, relative paths).
function jtSafeHref(url) {
  if (!/^https?:\/\//i.test(String(url))) return "";
  try {
    const parsed = new URL(url);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : "";
  } catch {
    return "";
  }
}

