"""Pure: one validated profile, as config/profiles.py builds it (a plain value, no I/O).

It lives below config (which reads and validates the files) so that every layer can name it in
its types; ``jupyter_tiers.config.profiles`` re-exports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Profile:
    """One validated profile. ``sources`` lists the files that contributed to it."""

    name: str
    tier: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    defaults: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict, repr=False)  # values may be secrets
    setup: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    #: Defined only by an untrusted project ./tiers.yaml (no trusted layer, not built in): the
    #: doctor and the sidebar's Check run nothing from it.
    project_defined: bool = False

    def get(self, key: str, default: Any = None) -> Any:
        return self.settings.get(key, default)

    @property
    def workdir(self) -> str:
        return str(self.settings.get("workdir", "~/jupyter-tiers"))
