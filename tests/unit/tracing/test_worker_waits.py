"""Waits inside workflows are zero-length spans with their length as an attribute
(``workers/tracing_waits.py``), in workflow time, written once and never on replay.

The production workflows run on Temporal's time-skipping test server (as
tests/unit/timers do) through a client that carries the tracing interceptor, each
started inside a test span; their activities are fakes under the production names.
What is checked: the span's name, parent trace, ``ingest.wait_seconds`` (hours of SLA
or backoff pass in a moment) and what was waited on; that a replay of the same history
writes no wait span; that with tracing off nothing is written (nor the SDK imported).
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from temporalio import activity
from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from pipeline import tracing
from schemas.approval_io import ApprovalDecision
from schemas.flow.io import (
    CloseWindowInput,
    CloseWindowResult,
    FlowAcquired,
    FlowAcquireInput,
    FlowWake,
    FlowWindowInput,
    FlowWindowSignal,
    WindowNote,
)
from schemas.ids import permit_workflow_id, task_workflow_id, window_workflow_id
from schemas.workflow_io import (
    FinishRunInput,
    FlowReleaseInput,
    FlowSlot,
    PermitAcquiredInput,
    PermitGrant,
    PermitLimits,
    PermitReleaseSignal,
    PermitRequest,
    PermitRoundInput,
    PermitSlotInput,
    PlanTasksInput,
    PlanTasksResult,
    TaskInstanceInput,
    TaskSpec,
)
from tests.support.runs import event_run
from tests.support.time_skipping import time_skipping_env
from tests.unit.timers.fakes import Fakes
from workers import tracing_waits
from workers.flow.part import WORKFLOW_MODULES as FLOW_MODULES
from workers.flow.window import FlowWindowWorkflow
from workers.parts import CORE_WORKFLOW_MODULES
from workers.permits.workflow import PermitSlotWorkflow
from workers.run_workflow import RunActivityWorkflow
from workers.sandbox import workflow_runner
from workers.task_workflow import TaskInstanceWorkflow

HOUR = 3600.0
WORKFLOWS = [RunActivityWorkflow, TaskInstanceWorkflow, PermitSlotWorkflow, FlowWindowWorkflow]
MODULES = (*CORE_WORKFLOW_MODULES, *FLOW_MODULES)


@dataclass
class MoreFakes(Fakes):
    """The timers' fakes plus the steps of permits, flow slots, windows and the run."""

    flow_rounds: list[FlowAcquired] = field(default_factory=list)
    plan: PlanTasksResult | None = None

    def all(self) -> list[Callable[..., Any]]:
        return [
            *super().all(),
            *(self.permit_round, self.permit_acquired, self.start_run, self.flow_acquire),
            *(self.flow_release, self.finish_run, self.close_window),
        ]

    @activity.defn(name="permit_round")
    async def permit_round(self, inp: PermitRoundInput) -> PermitLimits:
        return PermitLimits(1, 10 * HOUR, 5.0, 60.0)

    @activity.defn(name="permit_acquired")
    async def permit_acquired(self, inp: PermitAcquiredInput) -> PermitGrant:
        return PermitGrant(inp.resource, inp.slot, 1, inp.permit_run_id)

    @activity.defn(name="start_run")
    async def start_run(self, inp: PlanTasksInput) -> PlanTasksResult:
        assert self.plan is not None
        return self.plan

    @activity.defn(name="flow_acquire")
    async def flow_acquire(self, inp: FlowAcquireInput) -> FlowAcquired:
        return self.flow_rounds.pop(0)

    @activity.defn(name="flow_release")
    async def flow_release(self, inp: FlowReleaseInput) -> FlowWake:
        return FlowWake([])

    @activity.defn(name="finish_run")
    async def finish_run(self, inp: FinishRunInput) -> FlowWake | None:
        return FlowWake([]) if inp.release is not None else None

    @activity.defn(name="close_window")
    async def close_window(self, inp: CloseWindowInput) -> CloseWindowResult:
        return CloseWindowResult("started", f"run-{inp.window_id}", 1)


@pytest.fixture(scope="module")
async def time_env() -> AsyncIterator[WorkflowEnvironment]:
    async with time_skipping_env() as env:
        yield env


@pytest.fixture
def traced_client(time_env: WorkflowEnvironment, spans: InMemorySpanExporter) -> Client:
    """The test server's client with the interceptor ``tracing.temporal_interceptors``
    gives a traced process (the worker built on it gets its workflow side too)."""
    config = time_env.client.config()
    # Kept: the test server's own interceptor, which skips time while a result is awaited.
    config["interceptors"] = [*config["interceptors"], TracingInterceptor(tracing.tracer())]
    return Client(**config)


WorkerFactory = Callable[[Client, MoreFakes], AbstractAsyncContextManager[str]]


@asynccontextmanager
async def worker(client: Client, fakes: MoreFakes) -> AsyncIterator[str]:
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(
        client,
        task_queue=queue,
        workflows=WORKFLOWS,
        activities=fakes.all(),
        workflow_runner=workflow_runner(*MODULES),
    ):
        yield queue


def _named(spans: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in spans.get_finished_spans() if s.name == name]


def _one_wait(spans: InMemorySpanExporter, name: str, trace_id: int) -> dict[str, Any]:
    found = _named(spans, name)
    assert len(found) == 1, [s.name for s in spans.get_finished_spans()]
    span = found[0]
    assert span.context.trace_id == trace_id, "in the trace of the span that started the run"
    assert span.parent is not None
    assert span.start_time == span.end_time, "zero-length: the wait is an attribute"
    assert span.kind == SpanKind.INTERNAL
    return dict(span.attributes or {})


def _approval_input() -> TaskInstanceInput:
    run_id = str(uuid.uuid4())
    task_id = task_workflow_id(run_id, "approval", 0)
    spec = TaskSpec(
        "approval", 0, {"amount": 1200}, {"approvers": ["alice"], "sla_seconds": 48 * HOUR}
    )
    return TaskInstanceInput(task_id, run_id, str(uuid.uuid4()), spec, claim_running=True)


async def _approve_after_25_hours(
    env: WorkflowEnvironment, client: Client, queue: str
) -> tuple[WorkflowHandle[Any, Any], int]:
    inp = _approval_input()
    with tracing.tracer().start_as_current_span("test") as root:
        handle = await client.start_workflow(
            TaskInstanceWorkflow.run, inp, id=inp.task_id, task_queue=queue
        )
    await env.sleep(timedelta(hours=25))
    await handle.execute_update(TaskInstanceWorkflow.decide, ApprovalDecision("alice", "approve"))
    assert (await handle.result()).status == "succeeded"
    return handle, root.get_span_context().trace_id


async def test_an_approval_decision_ends_its_wait_span(time_env, traced_client, spans):
    async with worker(traced_client, MoreFakes()) as queue:
        handle, trace_id = await _approve_after_25_hours(time_env, traced_client, queue)
    attrs = _one_wait(spans, tracing_waits.APPROVAL, trace_id)
    assert attrs["ingest.approval_id"] == handle.id
    assert (attrs["ingest.outcome"], attrs["ingest.decision"]) == ("decision", "approve")
    assert (attrs["ingest.decided_by"], attrs["ingest.round"]) == ("alice", 1)
    assert 25 * HOUR <= attrs[tracing_waits.WAIT_SECONDS] < 25 * HOUR + 60
    assert attrs["temporalWorkflowID"] == handle.id
    # The run's own spans are there too (the interceptor), in the same trace.
    run = _named(spans, "RunWorkflow:TaskInstanceWorkflow")
    assert run and all(s.context.trace_id == trace_id for s in run)

    # Replaying the history (a worker restart, a cache eviction) writes no wait span again.
    history = await handle.fetch_history()
    spans.clear()
    replayer = Replayer(
        workflows=WORKFLOWS,
        interceptors=[TracingInterceptor(tracing.tracer())],
        workflow_runner=workflow_runner(*MODULES),
    )
    await replayer.replay_workflow(history)
    assert _named(spans, tracing_waits.APPROVAL) == []


async def test_an_auto_rejection_ends_its_wait_span(time_env, traced_client, spans):
    inp = _approval_input()
    async with worker(traced_client, MoreFakes()) as queue:
        with tracing.tracer().start_as_current_span("test") as root:
            handle = await traced_client.start_workflow(
                TaskInstanceWorkflow.run, inp, id=inp.task_id, task_queue=queue
            )
        assert (await handle.result()).status == "failed"
    attrs = _one_wait(spans, tracing_waits.APPROVAL, root.get_span_context().trace_id)
    assert attrs["ingest.outcome"] == "auto_rejected"
    assert "ingest.decision" not in attrs and "ingest.decided_by" not in attrs
    # 48 h SLA, then the default escalation SLA (24 h) with nobody to escalate to.
    assert attrs[tracing_waits.WAIT_SECONDS] >= 48 * HOUR


async def test_a_permit_wait_records_how_long_the_slot_was_busy(time_env, traced_client, spans):
    fakes = MoreFakes()
    run_id = str(uuid.uuid4())
    task_id = task_workflow_id(run_id, "noop", 0)
    spec = TaskSpec("noop", 0, permit=PermitRequest("gpu"))
    async with worker(traced_client, fakes) as queue:
        holder = await time_env.client.start_workflow(  # someone else holds the one slot
            PermitSlotWorkflow.run,
            PermitSlotInput("gpu", "0", 10 * HOUR, holder="other"),
            id=permit_workflow_id("gpu", "0"),
            task_queue=queue,
        )
        with tracing.tracer().start_as_current_span("test") as root:
            handle = await traced_client.start_workflow(
                TaskInstanceWorkflow.run,
                TaskInstanceInput(task_id, run_id, str(uuid.uuid4()), spec, claim_running=True),
                id=task_id,
                task_queue=queue,
            )
        await time_env.sleep(timedelta(minutes=10))
        await holder.signal(PermitSlotWorkflow.release, PermitReleaseSignal())
        assert (await handle.result()).status == "succeeded"
    attrs = _one_wait(spans, tracing_waits.PERMIT, root.get_span_context().trace_id)
    assert (attrs["ingest.permit_resource"], attrs["ingest.permit_slot"]) == ("gpu", "0")
    assert attrs["ingest.task_id"] == task_id
    # Busy until the release at 10 min; rounds back off up to a minute apart.
    assert 600 <= attrs[tracing_waits.WAIT_SECONDS] <= 600 + 61


async def test_a_queued_run_records_its_flow_slot_wait(time_env, traced_client, spans):
    run = event_run(str(uuid.uuid4()), data={"tenant": "t1"})
    slot = FlowSlot(f"flow.{run.activity_id}.k", run.activity_id, "t1", 1)
    grant = PermitGrant(slot.resource, "0", 7, "x")
    fakes = MoreFakes(
        plan=PlanTasksResult([TaskSpec("noop", 0, local=True)], flow_slot=slot),
        flow_rounds=[FlowAcquired(None, retry_seconds=HOUR), FlowAcquired(grant)],
    )
    async with worker(traced_client, fakes) as queue:
        with tracing.tracer().start_as_current_span("test") as root:
            handle = await traced_client.start_workflow(
                RunActivityWorkflow.run, run, id=run.workflow_id, task_queue=queue
            )
        assert (await handle.result()).status == "succeeded"
    attrs = _one_wait(spans, tracing_waits.FLOW_SLOT, root.get_span_context().trace_id)
    assert (attrs["ingest.flow_resource"], attrs["ingest.flow_key"]) == (slot.resource, "t1")
    assert (attrs["ingest.flow_limit"], attrs["ingest.rounds"], attrs["ingest.flow_slot"]) == (
        1,
        2,
        "0",
    )
    assert HOUR <= attrs[tracing_waits.WAIT_SECONDS] < HOUR + 60


async def test_a_closed_window_records_how_long_it_was_open(time_env, traced_client, spans):
    aid = str(uuid.uuid4())
    async with worker(traced_client, MoreFakes()) as queue:
        with tracing.tracer().start_as_current_span("test") as root:
            handle = await traced_client.start_workflow(  # signal-with-start, as the router
                FlowWindowWorkflow.run,
                FlowWindowInput(aid, "k1"),
                id=window_workflow_id(aid, "k1"),
                task_queue=queue,
                start_signal="windows",
                start_signal_args=[FlowWindowSignal([WindowNote(5, "debounce", 1, period=90.0)])],
            )
        assert await handle.result() == 1
    attrs = _one_wait(spans, tracing_waits.FLOW_WINDOW, root.get_span_context().trace_id)
    assert (attrs["ingest.window_id"], attrs["ingest.window_kind"]) == (5, "debounce")
    assert (attrs["ingest.closed_by"], attrs["ingest.flow_key"]) == ("quiet", "k1")
    assert attrs["ingest.activity_id"] == aid
    assert 90 <= attrs[tracing_waits.WAIT_SECONDS] < 150


async def test_off_no_wait_span_though_the_interceptor_runs(
    time_env, traced_client, spans, monkeypatch
):
    monkeypatch.setattr(tracing, "ENABLED", False)
    async with worker(traced_client, MoreFakes()) as queue:
        await _approve_after_25_hours(time_env, traced_client, queue)
    assert _named(spans, tracing_waits.APPROVAL) == []
    assert _named(spans, "RunWorkflow:TaskInstanceWorkflow"), "the interceptor's spans are"


def test_off_a_wait_returns_at_its_first_line(monkeypatch):
    # Outside a workflow, anything past the first line would raise (no workflow loop).
    monkeypatch.setattr(tracing, "ENABLED", False)
    tracing_waits.waited(tracing_waits.APPROVAL, 1.0, approval_id="x")


def test_off_the_workflows_load_no_tracing_sdk():
    code = (
        "import sys\n"
        "import workers.run_workflow, workers.task_workflow, workers.flow.window\n"
        "import workers.permits.workflow, workers.tracing_waits\n"
        "bad = [m for m in sys.modules if m.startswith(('opentelemetry.sdk',"
        " 'temporalio.contrib.opentelemetry'))]\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
