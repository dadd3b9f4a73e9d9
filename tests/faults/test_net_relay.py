"""The relay's link to Kafka cut inside its transactions (issue 40).

A real ``ingest relay`` publishes outbox rows in Kafka transactions, reaching the
broker only through Toxiproxy (the broker's PROXIED listener: ``tests/support/toxiproxy.py``);
PostgreSQL it reaches directly. While rows are written (paced), the link is cut again
and again while a transaction is open (each stays open ``COMMIT_DELAY`` s after its
sends, a test-only setting, and the cut lands inside it): ``reset_peer`` (the
connections reset), then ``timeout`` (half-open: what the relay sends is dropped, the
socket stays open) for ``HALF_OPEN`` s. Afterwards a ``read_committed`` reader must see
the outbox exactly: every row once, none missing, each key in the outbox's order; and
Kafka's own Java consumer the same. The figures say how many cuts landed, how many
relay terms ended, what a ``read_uncommitted`` reader sees besides (copies from aborted
transactions), and the seconds until every row was published after the last cut; while
the link is half-open no transaction may commit through it, and rows must be waiting.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import asyncpg
import pytest

from tests.faults import harness as h
from tests.support import toxiproxy as support
from tests.support.kafka import read_java
from tests.support.outbox import (
    insert_rows,
    outbox_order,
    published,
    read_committed,
    relay_env,
    spawn_relay,
    verdict,
)
from tests.support.wait import eventually

pytestmark = pytest.mark.slow  # make faults (with INGEST_STACK_KAFKA_PROXIED_PORT)

toxiproxy = support.toxiproxy
proxied = support.proxied

ROWS = h.scaled(300, 1500)
CUTS = h.scaled(4, 10)  # reset_peer cuts, each inside an open transaction
HALF_OPEN = h.scaled(15, 60)  # seconds of the half-open cut
COMMIT_DELAY = "0.3"  # seconds each relay transaction stays open after its sends


async def _pending(pool: asyncpg.Pool, instance: str) -> bool:
    total = int(await pool.fetchval("SELECT count(*) FROM outbox"))
    return total > await published(pool, instance)


async def _write(pool: asyncpg.Pool, topic: str, seconds: float) -> None:
    """``ROWS`` outbox rows over ``seconds``, 10 at a time."""
    for start in range(0, ROWS, 10):
        await insert_rows(pool, topic, min(10, ROWS - start), start=start)
        await asyncio.sleep(seconds * 10 / ROWS)


@pytest.mark.timeout(h.scaled(600, 1800))
async def test_net_relay_link_cut_inside_transactions(
    stack, topics, db_pool, database_url, proxied, fault, tmp_path: Path
):
    figures = fault.figures("net relay: link cut in transactions", events=ROWS, kills=0)
    instance = f"n-{uuid.uuid4().hex[:8]}"
    env = relay_env(
        proxied.kafka.listen,
        database_url,
        instance,
        INGEST_RELAY_BATCH_SIZE="25",
        INGEST_RELAY_FAULT_COMMIT_DELAY_SECONDS=COMMIT_DELAY,
        # a request into the half-open link gives up after 10 s, not aiokafka's 40
        KAFKA_REQUEST_TIMEOUT_MS="10000",
    )
    log = tmp_path / "relay.log"
    relay = await spawn_relay(env, log)

    async def stop() -> None:
        if relay.returncode is None:
            relay.terminate()
            await asyncio.wait_for(relay.wait(), 40)

    fault.cleanup(stop)
    writing = asyncio.create_task(_write(db_pool, topics.out, ROWS / 10))
    fault.cleanup(lambda: _cancel(writing))
    client, proxy = proxied.client, proxied.kafka

    def alive() -> None:
        assert relay.returncode is None, (
            f"the relay exited {relay.returncode}: {log.read_text()[-3000:]}"
        )

    async def some_published() -> bool:
        alive()
        return await published(db_pool, instance) > 0

    await eventually(some_published, 90, "the relay's first transaction through the proxy")
    cuts = 0
    for _ in range(CUTS):
        await eventually(lambda: _pending(db_pool, instance), 60, "rows for the relay")
        await asyncio.sleep(float(COMMIT_DELAY) / 2)  # inside the transaction's commit delay
        with support.toxic(client, proxy, "reset_peer", {"timeout": 0}, stream="upstream"):
            cuts += 1
            await asyncio.sleep(0.3)
        await asyncio.sleep(1.5)
        alive()
    await eventually(lambda: _pending(db_pool, instance), 60, "rows for the relay")
    with support.toxic(client, proxy, "timeout", {"timeout": 0}, stream="upstream"):
        await asyncio.sleep(1)  # a commit already answered lands; none after it can
        during = await published(db_pool, instance)
        await asyncio.sleep(HALF_OPEN - 1)
        alive()
        held = await published(db_pool, instance) - during, await _pending(db_pool, instance)
    healed = time.monotonic()
    await writing

    async def all_published() -> bool:
        alive()
        return await published(db_pool, instance) >= ROWS

    await eventually(all_published, 300, "every outbox row published after the cuts")
    recover = round(time.monotonic() - healed, 1)
    order = await outbox_order(db_pool)
    records = await read_committed(stack.kafka, topics.out, ROWS)
    v = verdict(records, order)
    java = verdict(await asyncio.to_thread(read_java, stack.kafka, topics.out), order)
    uncommitted = await asyncio.to_thread(read_java, stack.kafka, topics.out, "read_uncommitted")
    text = log.read_text()
    figures.update(
        lost=v.missing,
        duplicate_runs=v.duplicates,
        dlq=0,
        dlq_expected=0,
        cuts=cuts + 1,
        terms_ended=text.count("relay term ended"),
        aborted_copies=len(uncommitted) - java.seen,
        out_of_order_keys=v.out_of_order_keys,
        recover=recover,
        published_while_half_open=held[0],
    )
    alive()
    v.check()
    java.check()
    # The half-open cut was felt: rows waited and no transaction committed through it
    # (the producer retries into the dead link; it ends the term or resumes when it heals).
    assert held == (0, True), f"published during the half-open link, pending: {held}"


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
