"""Make README.md the front door, in one move.

Until then the docs pages *include* README.md's sections (MyST ``{include}`` blocks with
``:start-after:`` / ``:end-before:`` markers), so text added to README reaches the docs with no
copy to keep in step. This script:

1. replaces every such include block in ``docs/**/*.md`` with the README text it shows (image
   paths rewritten to be relative to the page, blank lines at the ends trimmed);
2. replaces README.md with ``docs/_front_door_README.md`` (the draft) and deletes the draft.

    python docs/_tools/front_door.py --check   what it would do; fails if a marker is missing,
                                               ambiguous or out of order (the docs test runs it)
    python docs/_tools/front_door.py           do it (then build the docs and run the tests)
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
DRAFT = DOCS / "_front_door_README.md"

_BLOCK = re.compile(r"^```\{include\} (?P<path>\S+)\n(?P<options>(?::[^\n]*\n)*)```\n", re.M)
_OPTION = re.compile(r'^:(?P<key>[\w-]+):(?: (?P<value>.*))?$')
_IMAGE = re.compile(r"(!\[[^\]]*\]\()([^)\s]+)(\))")


@dataclass(frozen=True)
class Include:
    page: Path
    start: int  # offsets of the block in the page
    end: int
    options: dict[str, str]


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def readme_includes(docs: Path | None = None, readme: Path | None = None) -> list[Include]:
    """Every include block of README.md in the docs pages."""
    docs, readme = docs or DOCS, readme or README
    found = []
    for page in sorted(docs.rglob("*.md")):
        if page == DRAFT or any(part.startswith("_") for part in page.relative_to(docs).parts[:-1]):
            continue
        text = page.read_text(encoding="utf-8")
        for block in _BLOCK.finditer(text):
            if (page.parent / block["path"]).resolve() != readme.resolve():
                continue
            options = {}
            for line in block["options"].splitlines():
                option = _OPTION.match(line)
                if option:
                    options[option["key"]] = _unquote(option["value"] or "")
            found.append(Include(page, block.start(), block.end(), options))
    return found


def slice_of(text: str, include: Include) -> str:
    """The part of README ``text`` that ``include`` shows; ValueError when a marker is missing
    or appears more than once (the include would silently show another part)."""
    start, end = 0, len(text)
    after = include.options.get("start-after")
    before = include.options.get("end-before")
    where = include.page.relative_to(ROOT)
    if after is not None:
        if text.count(after) != 1:
            raise ValueError(f"{where}: start-after {after!r} is in README.md {text.count(after)} times")
        start = text.index(after) + len(after)
    if before is not None:
        if text.count(before) != 1:
            raise ValueError(f"{where}: end-before {before!r} is in README.md {text.count(before)} times")
        end = text.index(before)
        if end < start:
            raise ValueError(f"{where}: end-before {before!r} comes before start-after {after!r}")
    return text[start:end]


def inlined(include: Include, text: str) -> str:
    """The README slice as page text: images relative to the page, ends trimmed."""
    part = slice_of(text, include).strip("\n")

    def image(match: re.Match[str]) -> str:
        path = match[2]
        if re.match(r"^[a-z]+:|^/|^#", path):
            return match[0]
        moved = os.path.relpath(ROOT / path, include.page.parent)
        return f"{match[1]}{moved}{match[3]}"

    return _IMAGE.sub(image, part) + "\n"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    text = README.read_text(encoding="utf-8")
    includes = readme_includes()
    if not DRAFT.exists():
        print(f"{DRAFT.relative_to(ROOT)} is missing: nothing to make the front door", file=sys.stderr)
        return 1
    try:
        pieces = [(include, inlined(include, text)) for include in includes]
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 1
    by_page: dict[Path, list[tuple[Include, str]]] = {}
    for include, body in pieces:
        by_page.setdefault(include.page, []).append((include, body))
    for page, items in by_page.items():
        lines = sum(body.count("\n") for _, body in items)
        print(f"{page.relative_to(ROOT)}: {len(items)} README part(s), {lines} lines")
        if check:
            continue
        page_text = page.read_text(encoding="utf-8")
        for include, body in sorted(items, key=lambda item: item[0].start, reverse=True):
            page_text = page_text[:include.start] + body + page_text[include.end:]
        page.write_text(page_text, encoding="utf-8")
    draft = DRAFT.read_text(encoding="utf-8")
    print(f"README.md: {text.count(chr(10))} lines -> {draft.count(chr(10))} lines (the front door)")
    if not check:
        README.write_text(draft, encoding="utf-8")
        DRAFT.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
