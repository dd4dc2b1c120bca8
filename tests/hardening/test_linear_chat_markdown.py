"""Issue 36 §4: Try it's Markdown (jupyter_tiers/faces/widgets/chat_markdown.js) is linear in the
answer: a streamed answer is parsed again at every animation frame, and one long line took
seconds (a 99,990-character fence line 16 s, as many backticks 19 s, a heading padded with 8,000
spaces minutes).

Node has no step counter for its regex engine, so the patterns are checked for the shapes that
backtrack super-linearly (read from the module's source, so the check fails on the old patterns):
two unbounded repeats of one character each, in a row (nothing between them that must consume),
that can both match the same character; a repeat of a repeat with no delimiter between
iterations; and in a searched pattern, an alternative that begins with an unbounded repeat (tried
afresh from each character of a long run). Then the module is run beside the one it replaced
(tests/hardening/chat_markdown_before_36.js) on a seeded fuzz: the same blocks and runs; and on
the hostile lines at full size, which give the expected blocks.
"""

from __future__ import annotations

import base64
import json
import random
import re
import re._constants as C
import re._parser as sre
from pathlib import Path
from typing import Any

from tests.unit.widget_js import WIDGETS, run_module

HERE = Path(__file__).parent
MODULE = WIDGETS / "chat_markdown.js"
_PROBE = [chr(i) for i in range(128)] + ["\u00a0", "\u2028", "\u2029", "\u3000", "é"]
_CATEGORY = {C.CATEGORY_DIGIT: r"\d", C.CATEGORY_NOT_DIGIT: r"\D", C.CATEGORY_SPACE: r"\s",
             C.CATEGORY_NOT_SPACE: r"\S", C.CATEGORY_WORD: r"\w", C.CATEGORY_NOT_WORD: r"\W"}
_UNBOUNDED = C.MAXREPEAT


def patterns_of(source: str) -> list[tuple[str, str, bool]]:
    """(name, pattern, searched) of each regex literal in the module: ``const X = /../flags;``
    and the ``/../.source`` pieces of a ``new RegExp([...].join("|"), "g")``."""
    found: list[tuple[str, str, bool]] = []
    for line in source.splitlines():
        if m := re.match(r"const (\w+) = /(.+)/([a-z]*);", line):
            found.append((m.group(1), m.group(2), "g" in m.group(3)))
        elif m := re.match(r"\s+/(.+)/\.source,", line):
            found.append(("INLINE piece", m.group(1), True))
    return found


def _chars(item: tuple[Any, Any], groups: dict[int, set[str]]) -> set[str] | None:
    """The probe characters one single-character item matches (None: not such an item)."""
    op, av = item
    if op is C.LITERAL:
        return {chr(av)}
    if op is C.NOT_LITERAL:
        return {c for c in _PROBE if c != chr(av)}
    if op is C.ANY:
        return {c for c in _PROBE if c not in "\n\r\u2028\u2029"}
    if op is C.GROUPREF:
        return groups.get(av)
    if op is C.SUBPATTERN and len(av[3]) == 1:
        return _chars(av[3][0], groups)
    if op is not C.IN:
        return None
    negate, members = False, set()
    for o, a in av:
        if o is C.NEGATE:
            negate = True
        elif o is C.LITERAL:
            members.add(chr(a))
        elif o is C.RANGE:
            members |= {c for c in _PROBE if a[0] <= ord(c) <= a[1]}
        elif o is C.CATEGORY:
            members |= {c for c in _PROBE if re.fullmatch(_CATEGORY[a], c)}
    return {c for c in _PROBE if c not in members} if negate else members


def _repeat(item: tuple[Any, Any], groups: dict[int, set[str]]) -> tuple[int, int, set[str] | None] | None:
    """(min, max, characters) of a repeat (inside a one-item group too), else None."""
    op, av = item
    if op is C.SUBPATTERN and len(av[3]) == 1:
        return _repeat(av[3][0], groups)
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
        lo, hi, body = av
        one = _chars(body[0], groups) if len(body) == 1 else None
        return lo, hi, one
    return None


def _may_be_empty(item: tuple[Any, Any], groups: dict[int, set[str]]) -> bool:
    op, _ = item
    rep = _repeat(item, groups)
    return (rep is not None and rep[0] == 0) or op in (C.AT, C.ASSERT, C.ASSERT_NOT)


def super_linear_shapes(pattern: str, searched: bool) -> list[str]:
    groups: dict[int, set[str]] = {}
    found: list[str] = []

    def walk(seq: Any, top: bool) -> None:
        items = list(seq)
        for item in items:  # groups first, so a back reference knows its characters
            if item[0] is C.SUBPATTERN and item[1][0] is not None and len(item[1][3]) == 1:
                chars = _chars(item[1][3][0], groups)
                if chars is not None:
                    groups[item[1][0]] = chars
        for i, item in enumerate(items):
            rep = _repeat(item, groups)
            if rep and rep[1] == _UNBOUNDED and rep[2] is not None:
                for later in items[i + 1:]:
                    other = _repeat(later, groups)
                    if other and other[1] == _UNBOUNDED and other[2] and rep[2] & other[2]:
                        found.append(f"two repeats trade characters: {sorted(rep[2] & other[2])[:5]}")
                    if not _may_be_empty(later, groups):
                        break
            op, av = item
            if op in (C.MAX_REPEAT, C.MIN_REPEAT) and av[1] == _UNBOUNDED and len(av[2]) > 1:
                inner = [r for r in (_repeat(x, groups) for x in av[2]) if r and r[1] == _UNBOUNDED]
                delimiters = [_chars(x, groups) for x in av[2] if _repeat(x, groups) is None]
                for r in inner:
                    if not any(d is not None and r[2] is not None and not (d & r[2]) for d in delimiters):
                        found.append("a repeat of a repeat without a delimiter")
            for sub in _children(item):
                walk(sub, False)

    tree = sre.parse(pattern)
    walk(tree, True)
    if searched:
        for alternative in _alternatives(tree):
            lead = [x for x in alternative if x[0] not in (C.ASSERT, C.ASSERT_NOT)]
            behind = [x for x in alternative[:1] if x[0] is C.ASSERT_NOT and x[1][0] == -1]
            rep = _repeat(lead[0], groups) if lead else None
            if rep and rep[1] == _UNBOUNDED and not behind:
                found.append("a searched alternative begins with an unbounded repeat")
    return found


def _children(item: tuple[Any, Any]) -> list[Any]:
    op, av = item
    if op is C.SUBPATTERN:
        return [av[3]]
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
        return [av[2]]
    if op is C.BRANCH:
        return list(av[1])
    if op in (C.ASSERT, C.ASSERT_NOT):
        return [av[1]]
    return []


def _alternatives(tree: Any) -> list[list[Any]]:
    items = list(tree)
    if len(items) == 1 and items[0][0] is C.BRANCH:
        return [list(b) for b in items[0][1][1]]
    if len(items) == 1 and items[0][0] is C.SUBPATTERN:
        return _alternatives(items[0][1][3])
    return [items]


def test_the_check_finds_the_shapes_that_were_slow() -> None:
    old = (HERE / "chat_markdown_before_36.js").read_text(encoding="utf-8")
    flagged = {name for name, pattern, searched in patterns_of(old) if super_linear_shapes(pattern, searched)}
    assert {"FENCE", "HEADING", "ITEM", "INLINE piece"} <= flagged


def test_no_pattern_of_the_module_has_a_super_linear_shape() -> None:
    found = patterns_of(MODULE.read_text(encoding="utf-8"))
    assert len(found) >= 8, "the module's patterns were not found: patterns_of needs updating"
    bad = {f"{name} /{pattern}/": shapes for name, pattern, searched in found
           if (shapes := super_linear_shapes(pattern, searched))}
    assert not bad


def _run(script: str) -> Any:
    """run_module, ``./before_36.js`` importing the reference module (as a data: URL)."""
    reference = base64.b64encode((HERE / "chat_markdown_before_36.js").read_bytes()).decode("ascii")
    return run_module(script.replace("./before_36.js", f"data:text/javascript;base64,{reference}"),
                      "linear chat Markdown tests")


def test_the_same_blocks_and_runs_as_before() -> None:
    rng = random.Random(20260036)
    atoms = ["`", "``", "```", "````", "~~~", "~", "*", "**", "_", "__", "[", "]", "(", ")", "#", "# ", "## ",
             " #", "- ", "1. ", "2) ", "> ", "---", "\n", "\n\n", "  ", " ", "\t", "x", "word", "a1", "https://e.org/",
             "\u2028", "\r", "é", "+ ", "***", "___", "` a `"]
    texts = ["".join(rng.choice(atoms) for _ in range(rng.randint(0, 40))) for _ in range(4000)]
    for _ in range(300):  # the 500-character bounds of the inline runs, and runs of backticks
        texts.append("".join(rng.choice([*atoms, "x" * rng.randint(440, 560), "`" * rng.randint(1, 8)])
                             for _ in range(rng.randint(1, 12))))
    differ = _run(
        'import * as now from "./chat_markdown.js";\nimport * as before from "./before_36.js";\n'
        f"const texts = {json.dumps(texts)};\n"
        "const both = (m, t) => JSON.stringify([m.jtMarkdownBlocks(t), m.jtInlines(t)]);\n"
        "console.log(JSON.stringify(texts.filter((t) => both(now, t) !== both(before, t))));")
    assert differ == []


def test_hostile_lines_at_full_size_give_the_expected_blocks() -> None:
    n = 99_990
    out = _run(
        'import { jtMarkdownBlocks as b, jtInlines as i } from "./chat_markdown.js";\n'
        f"const n = {n};\n"
        "console.log(JSON.stringify([\n"
        '  b("```" + "a".repeat(n - 4) + "`").map((x) => x.type),\n'
        '  i("`".repeat(n)).map((x) => [x.t, x.text.length]),\n'
        '  b("# a" + " ".repeat(n) + "x").map((x) => [x.type, x.text.length]),\n'
        '  b("~".repeat(n) + "`").map((x) => x.type),\n'
        '  b("-" + " ".repeat(n / 2) + "a".repeat(n / 2) + "\\u2028").map((x) => x.type),\n'
        '  b("```" + " ".repeat(n) + "\\nx\\n```").map((x) => [x.type, x.text]),\n'
        "]));")
    assert out == [["para"], [["text", n]], [["heading", n + 2]], ["para"], ["para"], [["code", "x"]]]
