"""A run is one trace on the real stack: the workflow, its task children and their
steps are spans of the trace the run was started in; the run's row names that trace;
an ``emit`` task's outbox row keeps its step's traceparent, and the record the relay
publishes carries it (through its ``publish`` span), as a ``read_committed`` reader sees.

Real Kafka, Temporal and PostgreSQL; the worker and the relay run in this process with
tracing on and the in-memory exporter (``conftest.py``).
"""

from __future__ import annotations

import asyncio
import uuid

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from pipeline import kafka, tracing
from tests.support.outbox import read_committed, running_relay
from tests.support.runs import event_run, insert_activity, start_run, worker_factory
from tests.support.wait import eventually
from workers.handlers import load_registry


def _names(spans: InMemorySpanExporter) -> list[str]:
    return sorted(s.name for s in spans.get_finished_spans())


def _named(spans: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in spans.get_finished_spans() if s.name == name]


async def test_a_run_its_tasks_and_its_relayed_record_are_one_trace(
    cfg, topics, db_pool, traced_temporal, spans
):
    aid = await insert_activity(
        db_pool, [{"type": "noop"}, {"type": "emit", "config": {"topic": topics.out}}]
    )
    run = event_run(aid, data={"order_id": "o-1"})
    worker = worker_factory(cfg, traced_temporal, db_pool)
    async with worker(registry=load_registry(use_entry_points=False)):
        with tracing.tracer().start_as_current_span("test start") as root:
            handle = await start_run(traced_temporal, run, cfg.temporal.task_queue)
        result = await asyncio.wait_for(handle.result(), 60)
    assert (result.status, result.tasks_succeeded) == ("succeeded", 2)
    trace_id = root.get_span_context().trace_id
    hex_id = f"{trace_id:032x}"

    names = _names(spans)
    (workflow,) = _named(spans, "RunWorkflow:RunActivityWorkflow")
    assert workflow.parent is not None
    assert len(_named(spans, "RunWorkflow:TaskInstanceWorkflow")) == 2, names
    assert len(_named(spans, "StartChildWorkflow:TaskInstanceWorkflow")) == 2, names
    (start_step,) = _named(spans, "RunActivity:start_run")
    assert start_step.kind == SpanKind.SERVER
    handler_steps = _named(spans, "RunActivity:run_local_task")
    assert len(handler_steps) == 2, names
    ours = [s for s in spans.get_finished_spans() if s.name.split(":")[0] in
            ("RunWorkflow", "StartChildWorkflow", "StartActivity", "RunActivity")]  # fmt: skip
    assert len(ours) >= 7, names
    assert {s.context.trace_id for s in ours} == {trace_id}, "one trace: the run's"

    row = await db_pool.fetchrow(
        "SELECT trace_id FROM activity_runs WHERE run_id = $1", uuid.UUID(run.run_id)
    )
    assert row["trace_id"] == hex_id, "the run's row names its trace"
    stored = await db_pool.fetchval("SELECT traceparent FROM outbox WHERE topic = $1", topics.out)
    assert stored is not None and stored.split("-")[1] == hex_id
    emit_step = next(s for s in handler_steps if f"{s.context.span_id:016x}" in stored)
    assert emit_step.attributes is not None

    spans.clear()
    async with running_relay(cfg):
        records = await read_committed(cfg.kafka.bootstrap_servers, topics.out, 1, timeout=60)

        async def published() -> bool:
            return bool(_named(spans, f"publish {topics.out}"))

        await eventually(published, 10, "the relay's publish span")
    assert len(records) == 1
    (publish,) = _named(spans, f"publish {topics.out}")
    assert publish.kind == SpanKind.PRODUCER
    assert publish.context.trace_id == trace_id
    assert publish.parent is not None and publish.parent.span_id == emit_step.context.span_id
    relayed = kafka.header(records[0].headers, "traceparent")
    assert relayed is not None
    version, tid, sid, _flags = relayed.decode().split("-")
    assert (version, tid, sid) == ("00", hex_id, f"{publish.context.span_id:016x}")
    assert kafka.header(records[0].headers, "task_id") is not None


async def test_untraced_a_run_leaves_no_trace_id_and_its_record_no_traceparent(
    cfg, topics, db_pool, temporal, spans, monkeypatch
):
    monkeypatch.setattr(tracing, "ENABLED", False)
    aid = await insert_activity(db_pool, [{"type": "emit", "config": {"topic": topics.out}}])
    run = event_run(aid)
    worker = worker_factory(cfg, temporal, db_pool)
    async with worker(registry=load_registry(use_entry_points=False)):
        handle = await start_run(temporal, run, cfg.temporal.task_queue)
        assert (await asyncio.wait_for(handle.result(), 60)).status == "succeeded"
    trace_id = await db_pool.fetchval(
        "SELECT trace_id FROM activity_runs WHERE run_id = $1", uuid.UUID(run.run_id)
    )
    assert trace_id is None
    assert await db_pool.fetchval("SELECT traceparent FROM outbox") is None
    async with running_relay(cfg):
        records = await read_committed(cfg.kafka.bootstrap_servers, topics.out, 1, timeout=60)
    assert len(records) == 1
    assert kafka.header(records[0].headers, "traceparent") is None
    assert list(spans.get_finished_spans()) == []
