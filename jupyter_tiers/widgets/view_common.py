"""The shared front-end helpers (view_common.js) put in front of each view's ES module."""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).parent


def view_module(name: str) -> str:
    """The ES module text of one view, with the shared helpers in front of it."""
    return (_HERE / "view_common.js").read_text(encoding="utf-8") + "\n" + (_HERE / name).read_text(
        encoding="utf-8")
