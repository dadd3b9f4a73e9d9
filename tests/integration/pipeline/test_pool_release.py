"""Releasing a pooled connection: no reset round trip, but nothing left open.

The pipeline leaves no session state on pooled connections (no session advisory
locks, SET, LISTEN or cursors outside a transaction; ``ingest migrate`` takes its
lock on a connection of its own), so ``pipeline.db.create_pool`` skips asyncpg's
reset statement on release: every bookkeeping step saved one round trip. What
asyncpg still does on release stays: an open transaction is rolled back.
"""

from __future__ import annotations

from pipeline import db


async def test_release_sends_no_reset_statement(database_url: str) -> None:
    pool = await db.create_pool(database_url, 1, 1)
    sent: list[str] = []
    try:
        async with pool.acquire() as conn:
            conn.add_query_logger(lambda record: sent.append(record.query))
            await conn.fetchval("SELECT 1")
            backend = conn.get_server_pid()
        async with pool.acquire() as again:
            assert again.get_server_pid() == backend  # the one connection, back from the pool
            await again.fetchval("SELECT 2")
    finally:
        await pool.close()
    assert sent == ["SELECT 1", "SELECT 2"], sent


async def test_release_still_rolls_back_an_open_transaction(database_url: str) -> None:
    pool = await db.create_pool(database_url, 1, 1)
    try:
        async with pool.acquire() as conn:
            await conn.execute("CREATE TABLE pool_release_probe (n int)")
            await conn.execute("BEGIN")
            await conn.execute("INSERT INTO pool_release_probe VALUES (1)")
        async with pool.acquire() as again:
            assert not again.is_in_transaction()
            assert await again.fetchval("SELECT count(*) FROM pool_release_probe") == 0
    finally:
        await pool.close()
