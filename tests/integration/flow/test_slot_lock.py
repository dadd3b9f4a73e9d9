"""The PostgreSQL lock of flow slots (workers/flow/slot_store.py, migration 0013) on the
real PostgreSQL: admission, the claim and the release decided under one lock, so
concurrent rounds never grant more than the limit; a retried round gets its grant back.
"""

from __future__ import annotations

import asyncio
import uuid

import asyncpg

from schemas.ids import flow_resource
from schemas.workflow_io import FlowSlot
from workers.flow import slot_store as flow_store

STALE = 120.0
LEASE = 60.0


def _slot(limit: int, key: str | None = "k") -> FlowSlot:
    activity_id = str(uuid.uuid4())
    return FlowSlot(flow_resource(activity_id, key), activity_id, key, limit)


async def _acquire(pool: asyncpg.Pool, slot: FlowSlot, holder: str) -> flow_store.Round:
    return await flow_store.acquire(pool, slot, holder, f"run-{holder}", LEASE, STALE)


async def _acquire_in_a_slow_transaction(
    pool: asyncpg.Pool, slot: FlowSlot, holder: str
) -> flow_store.Round:
    """A round whose transaction stays open a little after the call (a busy database):
    without the resource's lock, rounds running meanwhile would count the same free slots."""
    async with pool.acquire() as con, con.transaction():
        got = await flow_store.acquire(con, slot, holder, f"run-{holder}", LEASE, STALE)
        await asyncio.sleep(0.05)
    return got


async def test_concurrent_rounds_never_grant_more_than_the_limit(db_pool: asyncpg.Pool) -> None:
    slot = _slot(3)
    holders = [f"h{i:02}" for i in range(24)]
    rounds = await asyncio.gather(
        *(_acquire_in_a_slow_transaction(db_pool, slot, h) for h in holders)
    )
    granted = {h: r for h, r in zip(holders, rounds, strict=True) if r.slot is not None}
    assert sorted(r.slot for r in granted.values()) == ["0", "1", "2"]  # type: ignore[type-var]
    assert all(r.fresh and r.token == 1 for r in granted.values())
    waiting = await db_pool.fetchval(
        "SELECT count(*) FROM flow_waiters WHERE resource = $1", slot.resource
    )
    assert waiting == len(holders) - 3

    # A retried (or replayed) round of a holder: the same grant, nothing counted again.
    first, got = next(iter(granted.items()))
    again = await _acquire(db_pool, slot, first)
    assert (again.slot, again.token, again.fresh) == (got.slot, got.token, False)

    # Its release makes room for exactly one: the head of the queue, who gets its slot.
    wake = await flow_store.release(db_pool, slot, first, STALE)
    head = await db_pool.fetchval(
        "SELECT holder FROM flow_waiters WHERE resource = $1 ORDER BY priority, seq LIMIT 1",
        slot.resource,
    )
    assert wake == [head]
    others = [h for h in holders if h not in granted and h != head]
    assert (await _acquire(db_pool, slot, others[0])).slot is None  # not its turn
    taken = await _acquire(db_pool, slot, head)
    assert (taken.slot, taken.token, taken.fresh) == (got.slot, 2, True)  # the token rose
    assert await flow_store.release(db_pool, slot, first, STALE) == []  # a repeat ends nothing


async def test_the_last_to_leave_deletes_the_resource(db_pool: asyncpg.Pool) -> None:
    slot = _slot(1, key=None)
    assert (await _acquire(db_pool, slot, "a")).slot == "0"
    assert (await _acquire(db_pool, slot, "b")).slot is None
    assert await flow_store.release(db_pool, slot, "b", STALE) == []  # gave up waiting
    assert await db_pool.fetchval(
        "SELECT count(*) FROM flow_slot_keys WHERE resource = $1", slot.resource
    )
    assert await flow_store.release(db_pool, slot, "a", STALE) == []
    for table in ("flow_slot_keys", "permit_slots", "flow_waiters"):
        left = await db_pool.fetchval(
            f"SELECT count(*) FROM {table} WHERE resource = $1", slot.resource
        )
        assert left == 0, table
