"""Helpers of the server tests."""

from __future__ import annotations

import json
from typing import Any


def body(response: Any) -> Any:
    """The JSON body of a tornado response."""
    return json.loads(response.body.decode())
