"""The retention rule shared by the ledger, the flow decisions and windows, and the outbox
(``pipeline.db.prune_older_than``): rows past the retention go, newer ones stay, 0 keeps all."""

from __future__ import annotations

import uuid

from relay import outbox
from router.ledger import Ledger


async def _ledger_row(pool, wid: str, age_days: float) -> None:
    await pool.execute(
        "INSERT INTO routed_triggers (workflow_id, activity_id, first_routed_at)"
        " VALUES ($1, $2, now() - make_interval(secs => $3))",
        wid,
        uuid.uuid4(),
        age_days * 86400,
    )


async def test_ledger_prune_keeps_what_is_inside_the_retention(db_pool):
    old, new = f"prune-old-{uuid.uuid4()}", f"prune-new-{uuid.uuid4()}"
    await _ledger_row(db_pool, old, 10)
    await _ledger_row(db_pool, new, 1)
    ledger = Ledger(db_pool)
    assert await ledger.prune(0) == 0  # 0: keep forever
    assert await ledger.seen([old, new]) == {old, new}
    assert await ledger.prune(5) >= 1
    assert await ledger.seen([old, new]) == {new}


async def test_outbox_prune_drops_only_published_rows_past_the_retention(db_pool):
    tid = f"prune-test-{uuid.uuid4()}"
    ids = [f"{tid}:{i}" for i in range(3)]
    async with db_pool.acquire() as conn:
        for i, row_id in enumerate(ids):
            await conn.execute(
                "INSERT INTO outbox (id, topic, body, created_at)"
                " VALUES ($1, 't', 'b', now() - make_interval(secs => $2))",
                row_id,
                (10 if i < 2 else 1) * 86400,
            )
        second = await conn.fetchrow("SELECT txid, seq FROM outbox WHERE id = $1", ids[1])
        # The relay has published up to the second row; the third is new and unpublished.
        await conn.execute(
            "INSERT INTO outbox_relay (transactional_id, txid, seq) VALUES ($1, $2, $3)",
            tid,
            second["txid"],
            second["seq"],
        )
        assert await outbox.prune(conn, tid, 0) == 0
        assert await outbox.prune(conn, tid, 5) == 2
        left = await conn.fetch("SELECT id FROM outbox WHERE id = ANY($1::text[])", ids)
        assert [r["id"] for r in left] == [ids[2]]
        await conn.execute("DELETE FROM outbox WHERE id = ANY($1::text[])", ids)
        await conn.execute("DELETE FROM outbox_relay WHERE transactional_id = $1", tid)
