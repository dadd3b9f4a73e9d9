"""Shared fixtures: the real local stack, and per-test isolation.

* ``stack`` (session): uses the running stack, or starts it (``ingest stack up``).
* ``topics``: fresh raw/events/DLQ topic names per test, created on the broker.
* ``database_url``: a fresh database per test, cloned from a migrated template.
* ``task_queue``: a uuid Temporal task queue per test.
* ``cfg``: a :class:`pipeline.settings.Settings` wired to all of the above.

Temporal: the session claims a namespace of its own on the stack's dev server
(``ingest-test``; ``tests.support.namespaces``) and sets ``TEMPORAL_NAMESPACE`` to it
for the whole session, so ``cfg``, the ``temporal`` client and every process a test
starts use it, never ``default``. At the end it terminates what is still running
there, prints how many, and fails the session if ``default`` gained a workflow on one
of the session's task queues.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from devstack import manager
from devstack.postgres import Postgres
from devstack.settings import StackSettings

from pipeline import db, settings
from tests.support import ROOT, namespaces
from tests.support.ci_gate import pytest_runtest_makereport  # noqa: F401 (a hook)
from tests.support.stack import Stack, Topics

_SUMMARY = pytest.StashKey[list[str]]()


# The suite's subset that `make test` runs a second time on the real Temporal server
# (`make test-server`: INGEST_STACK_TEMPORAL=server; docs/testing.md says how it is
# chosen): every path where the server's own behaviour matters to the contract.
SERVER_SUBSET = (
    "tests/integration/test_stack.py",
    "tests/integration/e2e/",  # the event path, cron, CloudEvents identity, sizes
    "tests/integration/scheduler/test_misfire.py",  # each misfire policy
    "tests/integration/scheduler/test_duplicates.py",
    "tests/integration/replay/test_replay.py",  # replay after retention deleted the runs
    "tests/integration/router/",
    "tests/integration/permits/",
    "tests/integration/ops/test_pause_fix.py",  # pause-and-fix: updates, search attributes
    "tests/integration/approvals/test_approve.py",
    "tests/integration/approvals/test_decisions.py",
    "tests/integration/approvals/test_durable_timer.py",
    "tests/integration/approvals/test_escalation.py",
    "tests/integration/workers/test_run_workflow.py",
    "tests/integration/flow/test_fairness.py",  # the run, its child and activity carry it
    "tests/integration/pipeline/test_codec_history.py",  # no plaintext in the server's history
    "tests/faults/test_router_kill.py",  # the reduced fault suite on the shared server
    "tests/faults/test_ingress_kill.py",
    "tests/faults/test_worker_kill.py",
    "tests/faults/test_rebalance_replay.py",
)
# Only on the real server's pass: they start private real servers in the split shape,
# whose binary that pass's `ingest stack up --temporal server` has built.
SERVER_ONLY = (
    "tests/faults/test_temporal_server_faults.py",
    "tests/integration/stack/test_temporal_server.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = str(item.path)
        rel = item.path.relative_to(ROOT).as_posix() if item.path.is_relative_to(ROOT) else path
        if "/integration/" in path or "/faults/" in path:
            item.add_marker(pytest.mark.integration)
        if "/faults/" in path:
            item.add_marker(pytest.mark.faults)
        if rel.startswith(SERVER_ONLY):
            item.add_marker(pytest.mark.server_only)
        if rel.startswith(SERVER_SUBSET + SERVER_ONLY):
            item.add_marker(pytest.mark.temporal_server)


@pytest.fixture(scope="session")
def stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    if os.environ.get("INGEST_TEST_NO_STACK"):  # make test-unit: no service at all
        pytest.fail("this test needs the local stack; make test-unit runs without one")
    cfg = StackSettings(dir=ROOT / ".stack")
    if manager.status(cfg) != 0:
        assert manager.up(cfg) == 0, "ingest stack up failed; see .stack/logs/"
    pg_url = Postgres(cfg).url
    # Per session, so two pytest runs at once do not fight over one template.
    template = f"ingest_test_template_{os.getpid()}"
    asyncio.run(_make_template(pg_url, template))
    temporal = f"127.0.0.1:{cfg.temporal_port}"
    # Keyed by the server, not the checkout: two checkouts may share one running stack
    # (the second finds its services answering), and must not share a namespace.
    claim = namespaces.claim(Path(tempfile.gettempdir()) / f"ingest-test-namespaces-{temporal}")
    asyncio.run(namespaces.prepare(temporal, claim.name))
    session = namespaces.Session(temporal, claim.name)
    namespaces.current = session
    started = datetime.now(UTC)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TEMPORAL_NAMESPACE", claim.name)
        yield Stack(
            kafka=f"127.0.0.1:{cfg.kafka_port}",
            temporal=temporal,
            namespace=claim.name,
            admin_db_url=pg_url,
            template_db=template,
        )
    try:
        leaked = asyncio.run(_close_namespace(request.config, session, started))
    finally:
        namespaces.current = None
        claim.release()
        asyncio.run(_drop_database(pg_url, template))
    assert not leaked, (
        f"{len(leaked)} workflows of this session were started in the default namespace "
        f"(a client or process that ignores TEMPORAL_NAMESPACE), e.g. {leaked[:3]}"
    )


async def _close_namespace(
    config: pytest.Config, session: namespaces.Session, started: datetime
) -> list[tuple[str, str]]:
    from temporalio.client import Client

    client = await Client.connect(session.address, namespace=session.namespace)
    swept = await namespaces.sweep(client)
    line = namespaces.summary(session.namespace, swept, session.task_queues)
    leaked = await namespaces.leaked_into(session.address, started, session.task_queues)
    default = await namespaces.census(session.address, started)
    config.stash.setdefault(_SUMMARY, []).extend(
        [line, namespaces.census_line(namespaces.DEFAULT, default)]
    )
    return leaked


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    for line in config.stash.get(_SUMMARY, []):
        terminalreporter.write_line(line)


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
def task_queue(request: pytest.FixtureRequest) -> str:
    name = f"tq-{uuid.uuid4()}"
    if namespaces.current is not None:
        namespaces.current.task_queues[name] = request.node.nodeid
    return name


@pytest.fixture
def cfg(stack: Stack, topics: Topics, database_url: str, task_queue: str) -> settings.Settings:
    return settings.load_settings(
        kafka__bootstrap_servers=stack.kafka,
        kafka__raw_topic=topics.raw,
        kafka__events_topic=topics.events,
        kafka__dlq_topic=topics.dlq,
        kafka__partitions=3,
        temporal__address=stack.temporal,
        temporal__namespace=stack.namespace,
        temporal__task_queue=task_queue,
        database__url=database_url,
        process__metrics_port=0,
        process__shutdown_grace_seconds=10,
    )


@pytest.fixture(scope="session")
async def temporal(stack: Stack):  # type: ignore[no-untyped-def]
    from pipeline.clients import temporal_client

    # The production client (its converter included), so the workers the tests start in
    # this process decode as `ingest worker` does.
    return await temporal_client(
        settings.TemporalSettings(address=stack.temporal, namespace=stack.namespace)
    )
