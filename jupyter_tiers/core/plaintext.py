"""Cluster text shown as text (pure): the one sanitiser of what a cluster says — job names,
pending reasons, pod events, error messages, another user's output — before a terminal or a
text view prints it. Escape sequences and control characters (C0, DEL, C1) become ``?``, so a
planted ``ESC]52;…`` or ``CSI 2J`` in a Slurm reason or a pod event cannot drive the terminal."""

from __future__ import annotations

import re


def printable(text: str, keep: str = "") -> str:
    """``text`` with every non-printable character (and so every escape sequence's ESC) shown
    as ``?``; the characters of ``keep`` (e.g. ``"\\n\\t"`` for a block of output) stay."""
    if text.isprintable():  # the common case, in C
        return text
    return "".join(ch if ch.isprintable() or ch in keep else "?" for ch in text)


# A colour or cursor sequence (CSI: ESC [ parameters final-letter), bounded so the work is linear.
_CSI = re.compile(r"\x1b\[[0-9;?]{0,32}[A-Za-z]")


def strip_ansi(text: str) -> str:
    """``text`` without terminal colour and cursor sequences (vLLM's and many loggers' coloured
    lines read ``[0;36m(APIServer pid=41)[0;0m`` in a view that shows text as text). Any other
    escape stays, for :func:`printable` or the view's own text rendering to neutralise."""
    return _CSI.sub("", text) if "\x1b" in text else text
