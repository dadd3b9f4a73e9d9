"""The local stack's three services answer for real."""

from __future__ import annotations

import subprocess
import sys
import uuid
from datetime import timedelta

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from temporalio import workflow
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from tests.support import ROOT


async def test_kafka_produce_and_consume(stack, topics):
    producer = AIOKafkaProducer(bootstrap_servers=stack.kafka, acks="all")
    await producer.start()
    try:
        md = await producer.send_and_wait(topics.raw, b"hello", key=b"k", partition=1)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        topics.raw,
        bootstrap_servers=stack.kafka,
        group_id=f"g-{uuid.uuid4()}",
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        batch = await consumer.getmany(timeout_ms=10_000)
        msgs = [m for ms in batch.values() for m in ms]
        while not msgs:
            batch = await consumer.getmany(timeout_ms=10_000)
            msgs = [m for ms in batch.values() for m in ms]
    finally:
        await consumer.stop()
    assert [(m.value, m.key, m.partition, m.offset) for m in msgs] == [
        (b"hello", b"k", 1, md.offset)
    ]


@workflow.defn(name="StackHelloWorkflow")
class HelloWorkflow:
    @workflow.run
    async def run(self, name: str) -> str:
        return f"hello {name}"


async def test_temporal_runs_a_workflow(temporal, task_queue):
    async with Worker(
        temporal,
        task_queue=task_queue,
        workflows=[HelloWorkflow],
        workflow_runner=UnsandboxedWorkflowRunner(),  # defined in a test module
    ):
        result = await temporal.execute_workflow(
            HelloWorkflow.run,
            "stack",
            id=f"hello-{uuid.uuid4()}",
            task_queue=task_queue,
            execution_timeout=timedelta(seconds=30),
        )
    assert result == "hello stack"


async def test_postgres_is_migrated(db_pool):
    tables = {
        r["table_name"]
        for r in await db_pool.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        )
    }
    assert {"activities", "activity_runs", "task_instances", "schema_migrations"} <= tables
    cols = {
        r["column_name"]
        for r in await db_pool.fetch(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'activity_runs'"
        )
    }
    assert {"run_id", "workflow_id", "context_window_start", "context_window_end"} <= cols


async def test_migrate_is_idempotent(database_url):
    from pipeline import db

    conn = await db.connect(database_url)
    try:
        assert await db.migrate(conn) == []  # template already migrated
    finally:
        await conn.close()


def test_stack_up_twice_reports_already_running(stack):
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "stack", "up"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    for name in ("kafka", "temporal", "postgres"):
        line = next(ln for ln in out.stdout.splitlines() if ln.startswith(name))
        assert "already running" in line or "external" in line, out.stdout
    status = subprocess.run(
        [sys.executable, "-m", "app.cli", "stack", "status"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    # Jaeger is listed too once a tracing test has started it (it stays up like the rest).
    assert status.returncode == 0, status.stdout
    for name in ("kafka", "temporal", "postgres"):
        line = next(ln for ln in status.stdout.splitlines() if ln.startswith(name))
        assert "answering" in line, status.stdout
