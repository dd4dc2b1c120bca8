"""A profile as YAML, and added to an existing tiers.yaml's text without touching the rest
(pure). The edit is textual, so every comment, blank line and key order of the file stays; it
is then verified: the result must parse to exactly the old document with the one profile added
(or replaced), else :class:`MergeError` and nothing is written."""

from __future__ import annotations

import re
from typing import Any

import yaml

_PROFILES_RE = re.compile(r"profiles:[ \t]*(#.*)?")


class MergeError(ValueError):
    """The file's text could not be edited safely; one line saying what to do instead."""


def render_profile(name: str, profile: dict[str, Any], indent: int = 2) -> str:
    """``name:`` and its keys, each line indented by ``indent`` (to sit under ``profiles:``)."""
    text = yaml.safe_dump({name: profile}, sort_keys=False, default_flow_style=False,
                          allow_unicode=True, width=1000)
    return "".join(" " * indent + line + "\n" for line in text.splitlines())


def render_file(name: str, profile: dict[str, Any], header: str = "") -> str:
    """A new tiers.yaml holding the one profile."""
    return header + "profiles:\n" + render_profile(name, profile)


def _content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _load(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise MergeError(f"the file is not valid YAML ({str(exc).splitlines()[0][:120]})") from None


def add_profile(text: str, name: str, profile: dict[str, Any], *, replace: bool = False) -> str:
    """``text`` with ``profiles.NAME`` added at the end of ``profiles`` (or, with ``replace``,
    put where the old one was). MergeError when the file has that profile and ``replace`` is
    false, or when it is written in a way a line edit cannot follow (a flow mapping)."""
    before = _load(text) if text.strip() else None
    if before is not None and not isinstance(before, dict):
        raise MergeError("the file's top level is not a mapping")
    old_profiles = (before or {}).get("profiles") or {}
    if not isinstance(old_profiles, dict):
        raise MergeError("its 'profiles' is not a mapping")
    if name in old_profiles and not replace:
        raise MergeError(f"it already has a profile {name!r}")
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    start = next((i for i, line in enumerate(lines) if _PROFILES_RE.fullmatch(line.rstrip("\r\n"))), None)
    if start is None:
        if before is not None and "profiles" in before:
            raise MergeError("its 'profiles:' is not a block mapping on a line of its own")
        result = "".join(lines) + ("\n" if lines and _content(lines[-1]) else "") + \
            render_file(name, profile)
    else:
        # The block: every following line that is blank, a comment or indented.
        end = start + 1
        last_content = start
        child = 0
        while end < len(lines):
            line = lines[end]
            if _content(line):
                if _indent(line) == 0:
                    break
                child = child or _indent(line)
                last_content = end
            end += 1
        child = child or 2
        block = render_profile(name, profile, child)
        at, upto = last_content + 1, last_content + 1
        if name in old_profiles:
            at, upto = _profile_span(lines, start + 1, last_content + 1, name, child)
        result = "".join(lines[:at]) + block + "".join(lines[upto:])
    expected = dict(before or {})
    expected["profiles"] = {**old_profiles, name: profile}
    if _load(result) != expected:
        raise MergeError("a line edit of it would change more than the one profile")
    return result


def _profile_span(lines: list[str], first: int, stop: int, name: str, child: int) -> tuple[int, int]:
    """The lines of ``profiles.NAME`` (its key line to before the next key at its level)."""
    key = re.compile(rf" {{{child}}}(['\"]?){re.escape(name)}\1[ \t]*:([ \t].*|)")
    begin = next((i for i in range(first, stop) if key.fullmatch(lines[i].rstrip("\r\n"))), None)
    if begin is None:
        raise MergeError(f"cannot find the line where profile {name!r} starts")
    end = begin + 1
    last = begin
    while end < stop:
        if _content(lines[end]):
            if _indent(lines[end]) <= child:
                break
            last = end
        end += 1
    return begin, last + 1
