"""The outbox relay against the real stack: PostgreSQL, Kafka (transactions), processes.

Each test has its own database (so its own outbox), relay instance (so its own
transactional id) and topics.
"""

from __future__ import annotations

import asyncio
import functools
import signal
import uuid
from asyncio.subprocess import Process
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest

from pipeline import kafka, settings
from pipeline.clients import ensure_topics
from tests.support.kafka import read_java
from tests.support.outbox import (
    insert_rows,
    outbox_order,
    published,
    read_committed,
    relay_env,
    running_relay,
    spawn_relay,
    verdict,
)
from tests.support.stack import Stack, Topics
from tests.support.wait import eventually

pytestmark = pytest.mark.integration


@pytest.fixture
async def spawn() -> AsyncIterator[Callable[..., Awaitable[Process]]]:
    """``spawn_relay``, with every process it started SIGKILLed at the end if still alive
    (a failing test leaves no relay behind)."""
    procs: list[Process] = []

    async def start(env: dict[str, str], log: Path) -> Process:
        procs.append(await spawn_relay(env, log))
        return procs[-1]

    yield start
    for proc in procs:
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
            await proc.wait()


def _instance() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def _in_process(cfg: settings.Settings, instance: str, **kw: object):  # type: ignore[no-untyped-def]
    return running_relay(cfg, instance=instance, **kw)


async def test_publishes_each_row_once_in_order_with_its_dedupe_header(
    cfg: settings.Settings, db_pool: asyncpg.Pool, topics: Topics
) -> None:
    instance = _instance()
    await insert_rows(db_pool, topics.out, 120)
    async with _in_process(cfg, instance, batch_size=50):
        records = await read_committed(cfg.kafka.bootstrap_servers, topics.out, 120)
        await insert_rows(db_pool, topics.out, 30, start=120)  # rows arriving while it runs
        records += await read_committed(cfg.kafka.bootstrap_servers, topics.out, 150)
    v = verdict(records[120:], await outbox_order(db_pool))
    assert (v.seen, v.missing, v.duplicates, v.out_of_order_keys) == (150, 0, 0, 0), v
    assert await published(db_pool, instance) == 150  # the mirror caught up


async def test_a_restarted_relay_resumes_after_its_committed_progress(
    cfg: settings.Settings, db_pool: asyncpg.Pool, topics: Topics
) -> None:
    instance = _instance()
    await insert_rows(db_pool, topics.out, 40)
    async with _in_process(cfg, instance, batch_size=10):
        await eventually(lambda: _is(db_pool, instance, 40), 60, "40 rows published")
    await insert_rows(db_pool, topics.out, 25, start=40)
    async with _in_process(cfg, instance, batch_size=10):
        await eventually(lambda: _is(db_pool, instance, 65), 60, "65 rows published")
    verdict(
        await read_committed(cfg.kafka.bootstrap_servers, topics.out, 65),
        await outbox_order(db_pool),
    ).check()


async def _is(pool: asyncpg.Pool, instance: str, n: int) -> bool:
    return await published(pool, instance) >= n


async def test_a_row_committed_late_is_not_overtaken(
    cfg: settings.Settings,
    db_pool: asyncpg.Pool,
    topics: Topics,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A transaction that inserted first (smaller seq) but commits after a later one:
    the relay must publish neither past it, so both arrive, the first one first."""
    from relay import outbox

    # What each of the relay's polls of the outbox returned (row ids): proof that it
    # did poll while 'first' was uncommitted, and of what it then saw.
    polls: list[list[str]] = []
    visible_after = outbox.visible_after

    async def spy(conn: asyncpg.Connection, after: outbox.Position, limit: int) -> list[outbox.Row]:
        rows = await visible_after(conn, after, limit)
        polls.append([r.id for r in rows])
        return rows

    monkeypatch.setattr(outbox, "visible_after", spy)
    instance = _instance()
    slow = await db_pool.acquire()
    tx = slow.transaction()
    await tx.start()
    await slow.execute(
        "INSERT INTO outbox (id, topic, key, body) VALUES ('first', $1, 'k', '1')", topics.out
    )
    await db_pool.execute(
        "INSERT INTO outbox (id, topic, key, body) VALUES ('second', $1, 'k', '2')", topics.out
    )
    try:
        async with _in_process(cfg, instance):
            # Let the relay poll many times while 'first' is still uncommitted ...
            async def polled() -> bool:
                return len(polls) >= 20

            await eventually(polled, 60, "20 polls of the outbox by the relay")
            # ... and see nothing: 'second' is committed, but publishing it would
            # overtake 'first'. (Every poll's rows are committed to Kafka before the
            # next poll, so a read now would see anything those polls published.)
            assert polls[:20] == [[]] * 20, polls[:20]
            early = await read_committed(cfg.kafka.bootstrap_servers, topics.out, 0)
            assert early == [], [r.value for r in early]
            await tx.commit()
            records = await read_committed(cfg.kafka.bootstrap_servers, topics.out, 2)
    finally:
        await db_pool.release(slow)
    assert [r.value for r in records] == [b"1", b"2"]


async def test_finish_with_outbox_is_atomic_and_written_once(db_pool: asyncpg.Pool) -> None:
    from schemas.workflow_io import TaskSpec
    from workers import store

    run_id = str(uuid.uuid4())
    spec = TaskSpec(task_type="emit", index=0, payload={})
    msg = store.OutboxMessage("task-x", "out", b"k", (("task_id", b"task-x"),), b"{}")
    await store.claim_task(db_pool, "task-x", run_id, spec, running=True)
    first = await store.finish_with_outbox(db_pool, "task-x", msg)
    again = await store.finish_with_outbox(db_pool, "task-x", msg)  # a retried attempt
    assert first is not None and first.changed and first.status == "succeeded"
    assert again is not None and not again.changed
    assert await db_pool.fetchval("SELECT count(*) FROM outbox WHERE id = 'task-x'") == 1
    # A task failed meanwhile (an operator's abort) records nothing in the outbox.
    await store.claim_task(db_pool, "task-y", run_id, TaskSpec("emit", 1, {}), running=True)
    await store.advance_task(db_pool, "task-y", "failed", "aborted")
    row = await store.finish_with_outbox(
        db_pool, "task-y", store.OutboxMessage("task-y", "out", b"k", (), b"{}")
    )
    assert row is not None and row.status == "failed"
    assert await db_pool.fetchval("SELECT count(*) FROM outbox WHERE id = 'task-y'") == 0


async def test_relay_sigkilled_repeatedly_neither_skips_nor_duplicates(
    stack: Stack,
    database_url: str,
    db_pool: asyncpg.Pool,
    topics: Topics,
    tmp_path: Path,
    spawn: Callable[..., Awaitable[Process]],
) -> None:
    """Kafka's transactions test in small: SIGKILL the relay mid-stream, 3 times."""
    instance = _instance()
    n = 1500
    # Each transaction stays open 0.1 s after its sends (test-only), so the kills land
    # inside open transactions: checked below by the aborted records they leave.
    env = relay_env(
        stack.kafka,
        database_url,
        instance,
        INGEST_RELAY_BATCH_SIZE="20",
        INGEST_RELAY_FAULT_COMMIT_DELAY_SECONDS="0.1",
    )
    await insert_rows(db_pool, topics.out, n)
    log = tmp_path / "relay.log"
    for kill in range(3):
        proc = await spawn(env, log)
        mark = n * (kill + 1) // 5  # at least 20 % more each time
        await eventually(functools.partial(_is, db_pool, instance, mark), 120, f"{mark} published")
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    proc = await spawn(env, log)
    try:
        records = await read_committed(stack.kafka, topics.out, n, timeout=180)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0, log.read_text()[-3000:]
    order = await outbox_order(db_pool)
    verdict(records, order).check()
    # Kafka's own Java consumer, read_committed, must see the same: a reader nobody here
    # wrote, so a bug shared by the relay's client and the test's cannot hide.
    java = await asyncio.to_thread(read_java, stack.kafka, topics.out)
    v = verdict(java, order)
    assert v.seen == n, v
    v.check()
    uncommitted = await asyncio.to_thread(read_java, stack.kafka, topics.out, "read_uncommitted")
    assert len(uncommitted) > n, "no kill landed inside an open transaction"


async def test_a_standby_relay_takes_over_when_the_owner_dies(
    stack: Stack,
    database_url: str,
    db_pool: asyncpg.Pool,
    topics: Topics,
    tmp_path: Path,
    spawn: Callable[..., Awaitable[Process]],
) -> None:
    instance = _instance()
    env = relay_env(stack.kafka, database_url, instance, INGEST_RELAY_BATCH_SIZE="10")
    await ensure_topics(settings.KafkaSettings(bootstrap_servers=stack.kafka), [topics.out], 3)
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    first = await spawn(env, first_log)
    await eventually(lambda: _says(first_log, "owns the outbox"), 60, "the first relay leads")
    second = await spawn(env, second_log)
    await eventually(lambda: _says(second_log, "standing by"), 60, "the second waits")
    await insert_rows(db_pool, topics.out, 300)
    await eventually(lambda: _is(db_pool, instance, 100), 60, "100 rows published")
    first.send_signal(signal.SIGKILL)
    await first.wait()
    try:
        await eventually(lambda: _says(second_log, "owns the outbox"), 60, "the standby leads")
        records = await read_committed(stack.kafka, topics.out, 300)
    finally:
        second.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(second.wait(), 30) == 0
    verdict(records, await outbox_order(db_pool)).check()


async def _says(log: Path, text: str) -> bool:
    return await asyncio.to_thread(lambda: log.exists() and text in log.read_text())


async def test_an_unreadable_progress_record_stops_the_relay_with_one_clear_line(
    cfg: settings.Settings, topics: Topics
) -> None:
    """Where the relay stands is unknown: it must not start over from the first row."""
    from relay import progress
    from relay.progress import ProgressError
    from schemas.ids import relay_transactional_id

    instance = _instance()
    topic = f"progress-{instance}"
    key = relay_transactional_id(instance)
    await progress.ensure_topic(cfg.kafka, topic)
    # Written as the relay writes it: in a transaction (its commit marker follows it).
    producer = kafka.producer(cfg.kafka, transactional_id=f"{key}-bad")
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send_and_wait(topic, b'{"txid": "x"}', key=key.encode())
    finally:
        await producer.stop()
    with pytest.raises(ProgressError, match=f"{topic}.*offset 0.*ValueError"):
        await progress.read(cfg.kafka, topic, key)
