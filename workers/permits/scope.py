"""``hold_permit``: what TaskInstanceWorkflow wraps its handler execution in.

A task without ``permit`` holds nothing. With one, the Semaphore reads the
resource's limits before every round (``permit_round``, a local activity: a
capacity change applies to acquires after it), and once a slot is held,
``permit_acquired`` increments the slot's fencing token in PostgreSQL. The
yielded :class:`PermitGrant` goes to the handler as ``ctx.permit``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from temporalio.exceptions import ActivityError, ApplicationError

    from schemas.workflow_io import (
        PermitAcquiredInput,
        PermitGrant,
        PermitLimits,
        PermitRequest,
        PermitRoundInput,
    )
    from workers.errors import PermitUnavailable
    from workers.permits.activities import PermitActivities
    from workers.permits.semaphore import Semaphore
    from workers.steps import db_step
    from workers.tracing_waits import PERMIT, waited


@asynccontextmanager
async def hold_permit(
    task_id: str, request: PermitRequest | None
) -> AsyncIterator[PermitGrant | None]:
    """Yield None without a request; otherwise hold a permit for the body.

    Raises :class:`PermitUnavailable` when the resource is not declared (a definition
    problem: the task fails, like a bad handler config).
    """
    if request is None:
        yield None
        return

    async def limits(busy: int) -> PermitLimits:
        try:
            found: PermitLimits = await db_step(
                PermitActivities.permit_round, PermitRoundInput(request.resource, busy)
            )
        except (ActivityError, ApplicationError) as exc:
            cause = exc.cause if isinstance(exc, ActivityError) and exc.cause else exc
            raise PermitUnavailable(str(cause)) from exc
        return found

    lease = timedelta(seconds=request.lease_seconds) if request.lease_seconds else None
    async with Semaphore(request.resource, limits=limits).acquire(
        lease=lease, holder=task_id
    ) as held:
        waited(PERMIT, held.waited_seconds, permit_resource=held.resource, permit_slot=held.slot,
               task_id=task_id)  # fmt: skip
        grant: PermitGrant = await db_step(
            PermitActivities.permit_acquired,
            PermitAcquiredInput(
                held.resource,
                held.slot,
                held.run_id,
                task_id,
                held.lease_seconds,
                held.waited_seconds,
                held.busy,
            ),
        )
        yield grant
