"""Waiting on conditions instead of sleeping.

* :func:`eventually` polls a condition and fails the test naming what it waited for;
* :func:`wait_until` is the same, but answers True/False (for callers that record figures
  before they assert);
* :func:`quiet` waits until a sampled value stops changing for a bounded quiet period:
  what a test uses to let a stray duplicate surface, instead of a bare sleep.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any


async def wait_until(
    check: Callable[[], Awaitable[bool]], timeout: float = 60, interval: float = 0.3
) -> bool:
    """Poll ``check`` until it holds (True) or ``timeout`` seconds passed (False)."""
    deadline = time.monotonic() + timeout
    while True:
        if await check():
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(interval)


async def eventually(
    check: Callable[[], Awaitable[bool]], timeout: float = 60, what: str = "condition"
) -> None:
    """Poll ``check`` until it holds; fail the test after ``timeout`` seconds, naming ``what``."""
    if not await wait_until(check, timeout):
        raise AssertionError(f"timed out after {timeout}s waiting for {what}")


async def quiet(
    sample: Callable[[], Awaitable[Any]],
    what: str,
    period: float = 2.0,
    timeout: float = 60,
    interval: float = 0.25,
) -> Any:
    """Wait until ``sample()`` returns the same value for ``period`` seconds; return it.

    Fails after ``timeout`` seconds if the value never settles. A duplicate that a
    fault produced late (a redelivered start, a retried activity) changes the value,
    which restarts the quiet period, so the test then sees it.
    """
    deadline = time.monotonic() + timeout
    value = await sample()
    since = time.monotonic()
    while True:
        await asyncio.sleep(interval)
        now_value = await sample()
        now = time.monotonic()
        if now_value != value:
            value, since = now_value, now
        elif now - since >= period:
            return value
        if now >= deadline:
            raise AssertionError(f"{what} never stayed unchanged for {period}s in {timeout}s")
