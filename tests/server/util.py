"""Helpers of the server tests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

GUARD = 180.0  # seconds; bounds every wait so that a broken server fails instead of hanging


def body(response: Any) -> Any:
    """The JSON body of a tornado response."""
    return json.loads(response.body.decode())


async def until(fetch: Callable[[], Awaitable[Any]], cond: Callable[[Any], bool], what: str) -> Any:
    """Poll ``fetch`` (a coroutine function) until ``cond`` holds on its value, and return that
    value; fail naming ``what`` after GUARD seconds (a bound against hanging, not a timed check)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + GUARD
    while True:
        value = await fetch()
        if cond(value):
            return value
        if loop.time() > deadline:
            pytest.fail(f"gave up waiting for {what}; last: {value!r}"[:2000])
        await asyncio.sleep(0.5)
