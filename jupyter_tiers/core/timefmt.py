"""Durations as people read them (tier-neutral, pure)."""

from __future__ import annotations


def format_elapsed(seconds: int | float | None) -> str:
    """Seconds -> "HH:MM:SS" (with "D-" when a day or more)."""
    if seconds is None:
        return "--:--:--"
    total = max(0, int(seconds))
    days, rest = divmod(total, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    clock = f"{h:02d}:{m:02d}:{s:02d}"
    return f"{days}-{clock}" if days else clock
