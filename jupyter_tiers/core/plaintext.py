"""Cluster text shown as text (pure): the one sanitiser of what a cluster says — job names,
pending reasons, pod events, error messages, another user's output — before a terminal or a
text view prints it. Escape sequences and control characters (C0, DEL, C1) become ``?``, so a
planted ``ESC]52;…`` or ``CSI 2J`` in a Slurm reason or a pod event cannot drive the terminal."""

from __future__ import annotations


def printable(text: str, keep: str = "") -> str:
    """``text`` with every non-printable character (and so every escape sequence's ESC) shown
    as ``?``; the characters of ``keep`` (e.g. ``"\\n\\t"`` for a block of output) stay."""
    if text.isprintable():  # the common case, in C
        return text
    return "".join(ch if ch.isprintable() or ch in keep else "?" for ch in text)
