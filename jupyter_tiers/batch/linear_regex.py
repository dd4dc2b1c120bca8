"""Pure: regular expressions from users and files, compiled for an engine whose time is linear.

A metric pattern (``--metrics``, a profile's ``defaults.metrics``, which a project file may set)
runs on every log line, in the kernel and in the Jupyter server's log thread. Python's ``re``
backtracks: ``^(\\d+|\\w+|.)+!`` on a 22-character line held the GIL for 48 s. Such patterns are
compiled with RE2 (``google-re2``), which runs in time linear in the line's length whatever the
pattern. RE2 has no lookaround, backreferences, conditionals, atomic groups or possessive
quantifiers; a pattern that uses them is refused here with the construct named, before RE2 sees it
(RE2 writes its own parse errors to the process's stderr).
"""

from __future__ import annotations

import re
import warnings
from typing import Any, Protocol

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

__all__ = ["LinearPattern", "LinearRegexError", "compile_linear"]

with warnings.catch_warnings():  # sre_parse is deprecated as a module name, not as re._parser
    warnings.simplefilter("ignore", DeprecationWarning)
    from re import _parser as _sre  # type: ignore[attr-defined]  # the parser re itself uses

# Constructs RE2 does not have, by the parser's opcode names, with the words the refusal uses.
_UNSUPPORTED = {
    "ASSERT": "lookahead or lookbehind",
    "ASSERT_NOT": "negative lookahead or lookbehind",
    "GROUPREF": "a backreference",
    "GROUPREF_EXISTS": "a conditional group",
    "ATOMIC_GROUP": "an atomic group",
    "POSSESSIVE_REPEAT": "a possessive quantifier",
}


class LinearRegexError(ValueError):
    """A pattern that is not valid, or uses a construct the linear-time engine does not have."""


class LinearPattern(Protocol):
    """What callers use of a compiled pattern (``re2``'s, shaped like ``re.Pattern``)."""

    groups: int
    groupindex: Any

    def search(self, text: str) -> Any: ...


def _walk(items: Any) -> str | None:
    """The first unsupported construct in a parsed pattern, or None."""
    for op, arg in items:
        name = str(op)
        if name in _UNSUPPORTED:
            return _UNSUPPORTED[name]
        children: list[Any] = []
        if name in ("SUBPATTERN",):
            children = [arg[-1]]
        elif name in ("MAX_REPEAT", "MIN_REPEAT"):
            children = [arg[2]]
        elif name == "BRANCH":
            children = list(arg[1])
        for child in children:
            found = _walk(child)
            if found is not None:
                return found
    return None


def compile_linear(pattern: str) -> LinearPattern:
    """``pattern`` compiled for RE2 (linear time), or :class:`LinearRegexError` saying what is
    wrong: Python's own message for a malformed pattern, the construct for one RE2 lacks."""
    try:
        with warnings.catch_warnings():  # "possible nested set" and the like: not the user's news
            warnings.simplefilter("ignore")
            parsed = _sre.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise LinearRegexError(str(exc)) from None
    construct = _walk(parsed)
    if construct is not None:
        raise LinearRegexError(f"uses {construct}, which the linear-time engine (RE2) does not "
                               "have: rewrite it without")
    try:
        compiled: LinearPattern = re2.compile(pattern)
        return compiled
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise LinearRegexError(f"the linear-time engine (RE2) refuses it: {detail}") from None
