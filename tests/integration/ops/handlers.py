"""A task handler that fails on bad data: what pause-and-fix is for.

Importable by a worker subprocess: ``INGEST_TASK_HANDLERS=tests.integration.ops.handlers``.
"""

from __future__ import annotations

import asyncio

from workers.handlers import PermanentTaskError, TaskContext
from workers.handlers.registry import register


@register("charge")
async def charge(ctx: TaskContext) -> None:
    """Needs a non-negative number in ``payload.amount``; anything else fails for good."""
    amount = ctx.payload.get("amount")
    if isinstance(amount, bool) or not isinstance(amount, int | float) or amount < 0:
        raise PermanentTaskError(f"amount must be a non-negative number, got {amount!r}")
    await asyncio.sleep(float(ctx.payload.get("delay_seconds", 0)))  # a slow success
