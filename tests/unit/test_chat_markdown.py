"""The model's Markdown in Try it (jupyter_tiers/faces/widgets/chat_markdown.js), run by node: the
blocks and inline runs the panel builds as DOM text nodes (never innerHTML), links only to
http(s), a streamed answer's unclosed code block, and a seeded fuzz: any text parses, loses no
character of code, and keeps every href safe."""

from __future__ import annotations

import json
import random
from typing import Any

from tests.unit.widget_js import run_module


def js(expr: str) -> Any:
    return run_module('import { jtMarkdownBlocks, jtInlines, jtSafeHref } from "./chat_markdown.js";\n'
                      f"console.log(JSON.stringify({expr}));", "chat Markdown JS tests")


def test_blocks_of_a_typical_answer() -> None:
    text = ("## Plan\n\nUse **uPlot**.\nSecond line\n\n- one\n- two\n  more\n1. a\n2) b\n\n"
            "```python\nprint('<b>')\n\n  indented\n```\n> quoted\n> on\n---\ntail ```x")
    assert js(f"jtMarkdownBlocks({json.dumps(text)})") == [
        {"type": "heading", "level": 2, "text": "Plan"},
        {"type": "para", "text": "Use **uPlot**.\nSecond line"},
        {"type": "list", "ordered": False, "start": 1, "items": ["one", "two\nmore"]},
        {"type": "list", "ordered": True, "start": 1, "items": ["a", "b"]},
        {"type": "code", "lang": "python", "text": "print('<b>')\n\n  indented", "open": False},
        {"type": "quote", "text": "quoted\non"},
        {"type": "rule"},
        {"type": "para", "text": "tail ```x"},
    ]


def test_a_streamed_answer_has_an_open_code_block() -> None:
    assert js('jtMarkdownBlocks("Here:\\n~~~\\nx = 1\\n")') == [
        {"type": "para", "text": "Here:"}, {"type": "code", "lang": "", "text": "x = 1\n", "open": True}]


def test_inline_runs_and_links() -> None:
    runs = js('jtInlines("a **b** `<i>c</i>` *d* snake_case_x _e_ [ok](https://x.org/a?b=1) '
              '[bad](javascript:alert) [rel](/etc/passwd) <img src=x>")')
    assert runs == [
        {"t": "text", "text": "a "}, {"t": "b", "text": "b"}, {"t": "text", "text": " "},
        {"t": "code", "text": "<i>c</i>"}, {"t": "text", "text": " "}, {"t": "i", "text": "d"},
        {"t": "text", "text": " snake_case_x "}, {"t": "i", "text": "e"}, {"t": "text", "text": " "},
        {"t": "a", "text": "ok", "href": "https://x.org/a?b=1"},
        {"t": "text", "text": " bad (javascript:alert) rel (/etc/passwd) <img src=x>"},
    ]
    assert js('["https://a.b/", "HTTP://A.B", "javascript:x", "data:text/html,x", "//a.b", "http://", " https://a"]'
              ".map(jtSafeHref)") == ["https://a.b/", "http://a.b/", "", "", "", "", ""]


def test_fuzz_any_text_parses_keeps_code_and_only_safe_links() -> None:
    rng = random.Random(29009)
    atoms = ["`", "``", "```", "~~~", "*", "**", "_", "__", "[", "]", "(", ")", "#", "# ", "- ", "1. ", "> ",
             "---", "\n", "\n\n", "  ", "x", "word", "<b>", "javascript:", "https://e.org/", "é", "\x00"]
    texts = ["".join(rng.choice(atoms) for _ in range(rng.randint(0, 60))) for _ in range(300)]
    out = js(f"{json.dumps(texts)}.map((t) => {{ const b = jtMarkdownBlocks(t); "
             "return [b, b.flatMap((x) => x.type === 'list' ? x.items : x.text === undefined ? [] : [x.text])"
             ".map(jtInlines)]; })")
    for text, (blocks, inlines) in zip(texts, out, strict=True):
        for block in blocks:
            assert block["type"] in {"code", "heading", "list", "quote", "rule", "para"}
            if block["type"] == "code":
                assert block["text"] in text.replace("\r", "")
        for runs in inlines:
            for run in runs:
                assert run["t"] in {"text", "code", "b", "i", "a"}
                if run["t"] == "a":
                    assert run["href"].startswith(("http://", "https://"))
