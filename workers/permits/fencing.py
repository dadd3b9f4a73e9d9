"""``ctx.permit``: the permit a handler runs under, and its fencing check.

A lease expiry does not prove the old holder stopped: a handler can outlive its
lease (a long GC pause, a partition) while the next holder already runs. Each
acquire therefore gets a **fencing token**, a per-(resource, slot) counter in
PostgreSQL that only rises. The holder passes it along with every write, and the
downstream keeps the highest token it has seen per (resource, slot) and rejects
lower ones. ``check()`` does that comparison against PostgreSQL itself, for
handlers whose downstream cannot.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import asyncpg

from schemas.workflow_io import PermitGrant
from workers.handlers.errors import PermanentTaskError
from workers.permits import store


class StalePermitError(PermanentTaskError):
    """A newer holder has acquired this slot: this holder must stop (no retry)."""


@dataclass(frozen=True)
class Permit:
    resource: str
    slot: str
    token: int
    permit_run_id: str
    _current: Callable[[], Awaitable[int | None]] = field(repr=False, compare=False)

    async def check(self) -> None:
        """Raise :class:`StalePermitError` if the slot's current token is higher than ours."""
        current = await self._current()
        if current is not None and current > self.token:
            raise StalePermitError(
                f"permit {self.resource}/{self.slot} token {self.token} is stale:"
                f" the slot was acquired again (token {current})"
            )

    def headers(self) -> dict[str, str]:
        """HTTP headers that let a receiver fence: reject tokens lower than the highest seen."""
        return {
            "Fencing-Token": str(self.token),
            "Fencing-Resource": f"{self.resource}/{self.slot}",
        }


def permit_for(pool: asyncpg.Pool, grant: PermitGrant | None) -> Permit | None:
    """The handler's ``ctx.permit`` for a grant, checking against ``pool``."""
    if grant is None:
        return None

    async def current() -> int | None:
        return await store.current_token(pool, grant.resource, grant.slot)

    return Permit(grant.resource, grant.slot, grant.token, grant.permit_run_id, current)
