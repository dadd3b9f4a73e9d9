"""Shared fixtures: the real local stack, and per-test isolation.

* ``stack`` (session): uses the running stack, or starts it (``ingest stack up``).
* ``topics``: fresh raw/events/DLQ topic names per test, created on the broker.
* ``database_url``: a fresh database per test, cloned from a migrated template.
* ``task_queue``: a uuid Temporal task queue per test.
* ``cfg``: a :class:`pipeline.settings.Settings` wired to all of the above.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest

from pipeline import db, settings
from pipeline.stack import manager
from pipeline.stack.postgres import Postgres
from pipeline.stack.settings import StackSettings
from tests.support import ROOT
from tests.support.stack import Stack, Topics


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = str(item.path)
        if "/integration/" in path or "/faults/" in path:
            item.add_marker(pytest.mark.integration)
        if "/faults/" in path:
            item.add_marker(pytest.mark.faults)


@pytest.fixture(scope="session")
def stack() -> Iterator[Stack]:
    cfg = StackSettings(dir=ROOT / ".stack")
    if manager.status(cfg) != 0:
        assert manager.up(cfg) == 0, "ingest stack up failed; see .stack/logs/"
    pg_url = Postgres(cfg).url
    # Per session, so two pytest runs at once do not fight over one template.
    template = f"ingest_test_template_{os.getpid()}"
    asyncio.run(_make_template(pg_url, template))
    yield Stack(
        kafka=f"127.0.0.1:{cfg.kafka_port}",
        temporal=f"127.0.0.1:{cfg.temporal_port}",
        admin_db_url=pg_url,
        template_db=template,
    )
    asyncio.run(_drop_database(pg_url, template))


async def _drop_database(url: str, name: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


def _with_db(url: str, name: str) -> str:
    base, _, _ = url.rpartition("/")
    return f"{base}/{name}"


async def _make_template(url: str, template: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{template}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{template}"')
    finally:
        await conn.close()
    conn = await asyncpg.connect(_with_db(url, template))
    try:
        await db.migrate(conn)
    finally:
        await conn.close()


@pytest.fixture
async def database_url(stack: Stack) -> AsyncIterator[str]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(stack.admin_db_url)
    try:
        await conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{stack.template_db}"')
    finally:
        await conn.close()
    yield _with_db(stack.admin_db_url, name)
    conn = await asyncpg.connect(stack.admin_db_url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


@pytest.fixture
async def db_pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await db.create_pool(database_url, 1, 10)
    yield pool
    await pool.close()


@pytest.fixture
async def topics(stack: Stack) -> Topics:
    from pipeline.clients import ensure_topics

    tag = uuid.uuid4().hex[:10]
    t = Topics(raw=f"raw-{tag}", events=f"events-{tag}", dlq=f"dlq-{tag}", out=f"out-{tag}")
    await ensure_topics(
        settings.KafkaSettings(bootstrap_servers=stack.kafka), [t.raw, t.events, t.dlq, t.out], 3
    )
    return t


@pytest.fixture
def task_queue() -> str:
    return f"tq-{uuid.uuid4()}"


@pytest.fixture
def cfg(stack: Stack, topics: Topics, database_url: str, task_queue: str) -> settings.Settings:
    return settings.load_settings(
        kafka__bootstrap_servers=stack.kafka,
        kafka__raw_topic=topics.raw,
        kafka__events_topic=topics.events,
        kafka__dlq_topic=topics.dlq,
        kafka__partitions=3,
        temporal__address=stack.temporal,
        temporal__task_queue=task_queue,
        database__url=database_url,
        process__metrics_port=0,
        process__shutdown_grace_seconds=10,
    )


@pytest.fixture(scope="session")
async def temporal(stack: Stack):  # type: ignore[no-untyped-def]
    from temporalio.client import Client

    return await Client.connect(stack.temporal)
