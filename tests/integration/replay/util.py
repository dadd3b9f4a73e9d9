"""Replay test helpers: route with the live Router, make Temporal forget, produce at times."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaProducer
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import Client

from pipeline.runtime import Shutdown
from pipeline.settings import Settings
from router.config import RouterSettings
from router.service import Router
from tests import helpers


async def route_until_committed(
    cfg: Settings, rcfg: RouterSettings, temporal: Client, pool, timeout: float = 60
) -> Router:  # type: ignore[no-untyped-def]
    """Run the live Router in-process until its group has committed the end offsets."""
    shutdown = Shutdown()
    router = Router(cfg, rcfg, client=temporal, pool=pool, shutdown=shutdown)
    task = asyncio.create_task(router.run())
    end = await helpers.end_offsets(cfg.kafka.bootstrap_servers, cfg.kafka.events_topic)

    async def caught_up() -> bool:
        got = await helpers.committed(
            cfg.kafka.bootstrap_servers, rcfg.group, cfg.kafka.events_topic
        )
        return all((got.get(p) or 0) >= off for p, off in end.items())

    try:
        await helpers.eventually(caught_up, timeout, "router commits reaching the end offsets")
    finally:
        shutdown.trigger()
        await asyncio.wait_for(task, 30)
    return router


async def exists(client: Client, wid: str) -> bool:
    try:
        await client.get_workflow_handle(wid).describe()
        return True
    except Exception:
        return False


async def forget(client: Client, wids: list[str]) -> None:
    """Delete the executions, as retention would, and wait until describe fails for all."""
    for wid in wids:
        await client.workflow_service.delete_workflow_execution(
            DeleteWorkflowExecutionRequest(
                namespace=client.namespace, workflow_execution=WorkflowExecution(workflow_id=wid)
            )
        )

    async def all_gone() -> bool:
        return not any([await exists(client, w) for w in wids])

    await helpers.eventually(all_gone, 60, "Temporal to forget the deleted workflows")


async def produce_at(bootstrap: str, topic: str, items: list[tuple[bytes, bytes, int]]) -> None:
    """Produce (key, value, timestamp_ms) records."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        futs = [await producer.send(topic, v, key=k, timestamp_ms=ts) for k, v, ts in items]
        for f in futs:
            await f
    finally:
        await producer.stop()
