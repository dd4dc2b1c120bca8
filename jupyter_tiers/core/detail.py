"""Pure: a registry record's ``detail``, a JSON object whose entries several modules own.

Arrays keep their counts line under ``tasks``, a training job its checkpoint under
``checkpoint_dir``/``checkpoint``, an upload its progress under ``upload`` (an array's tasks under
``uploads``), an ended job what its final status said of its end under ``ended``
(batch/status.ended_entry). Each owner reads and replaces its own entries through these two
functions, so a damaged or foreign ``detail`` reads as empty and never costs another owner's
entries.
"""

from __future__ import annotations

import json
from typing import Any


def entries(detail: str | None) -> dict[str, Any]:
    """The entries of ``detail`` (an empty dict when it is missing, not JSON or not an object)."""
    try:
        data = json.loads(detail or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def with_entries(detail: str | None, **changes: Any) -> str:
    """``detail`` with the given entries replaced and the others kept (canonical JSON)."""
    return json.dumps({**entries(detail), **changes}, sort_keys=True)
