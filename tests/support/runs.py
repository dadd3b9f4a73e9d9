"""Runs started directly on Temporal (no Kafka): an activity row, a run input, a start;
and the real worker in-process (:func:`worker_factory`)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import asyncpg
from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy

from definitions import store
from pipeline.runtime import Shutdown
from pipeline.settings import Settings
from schemas.definitions import ActivityDef, EventTrigger, PermitDef, TaskDef
from schemas.ids import event_workflow_id, run_id_for
from schemas.workflow_io import RunActivityInput
from workers.handlers import Handler, Registry, load_registry
from workers.parts import PartFactory, core_part
from workers.run_workflow import RunActivityWorkflow
from workers.settings import WorkerSettings
from workers.worker import run_worker


async def insert_activity(pool: asyncpg.Pool, tasks: list[dict[str, Any]]) -> str:
    """Store an activity with these tasks, unchecked: a test may store a task
    ``apply`` would refuse (the planner must reject it)."""
    activity_id = str(uuid.uuid4())
    act = ActivityDef.model_construct(
        id=uuid.UUID(activity_id),
        name=f"test-{activity_id[:8]}",
        trigger=EventTrigger(type="event", event_type="test.event"),
        tasks=[TaskDef.model_construct(**_with_permit(t)) for t in tasks],
    )
    await store.upsert(pool, [act])
    return activity_id


def _with_permit(task: dict[str, Any]) -> dict[str, Any]:
    """The task's ``permit`` as the model it is stored from (a dict would serialise
    with a pydantic warning); everything else stays unchecked."""
    permit = task.get("permit")
    if isinstance(permit, dict):
        return {**task, "permit": PermitDef.model_validate(permit)}
    return task


def event_run(
    activity_id: str, event_id: str | None = None, data: dict[str, Any] | None = None
) -> RunActivityInput:
    event_id = event_id or f"evt-{uuid.uuid4().hex[:12]}"
    workflow_id = event_workflow_id(activity_id, event_id)
    return RunActivityInput(
        activity_id=activity_id,
        workflow_id=workflow_id,
        run_id=str(run_id_for(workflow_id)),
        trigger_kind="event",
        event_id=event_id,
        event={"event_id": event_id, "type": "test.event", "data": data or {}},
    )


async def start_run(client: Client, run: RunActivityInput, task_queue: str) -> WorkflowHandle:
    return await client.start_workflow(
        RunActivityWorkflow.run,
        run,
        id=run.workflow_id,
        task_queue=task_queue,
        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        execution_timeout=timedelta(seconds=120),
    )


def registry_with(**handlers: Handler) -> Registry:
    reg = load_registry(use_entry_points=False)
    for name, fn in handlers.items():
        reg.add(fn, name)
    return reg


WorkerFactory = Callable[..., Any]


def worker_factory(cfg: Settings, temporal: Client, db_pool: asyncpg.Pool) -> WorkerFactory:
    """``async with factory(registry=..., settings=..., parts=..., emit_topic=...)``: a
    running worker (``parts``: the runs alone unless given)."""

    @asynccontextmanager
    async def run(
        registry: Registry | None = None,
        settings: Settings | None = None,
        parts: Sequence[PartFactory] = (core_part,),
        **wkw: Any,
    ) -> AsyncIterator[asyncio.Task[int]]:
        shutdown = Shutdown()
        task = asyncio.create_task(
            run_worker(
                settings or cfg,
                shutdown,
                client=temporal,
                pool=db_pool,
                registry=registry or load_registry(use_entry_points=False),
                worker_settings=WorkerSettings(**wkw),
                parts=parts,
            )
        )
        try:
            yield task
        finally:
            shutdown.trigger()
            assert await asyncio.wait_for(task, 60) == 0

    return run


async def local_activity_types(handle: WorkflowHandle[Any, Any]) -> list[str]:
    """The activity type of every local-activity marker in a workflow's history, in order."""
    types = []
    async for e in handle.fetch_history_events():
        marker = e.marker_recorded_event_attributes
        if e.HasField("marker_recorded_event_attributes") and marker.marker_name != "core_patch":
            data = marker.details["data"].payloads[0].data
            types.append(json.loads(data)["activity_type"])
    return types
