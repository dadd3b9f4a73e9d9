"""Replay test helpers: route with the live Router, make Temporal forget, produce at times."""

from __future__ import annotations

from aiokafka import AIOKafkaProducer
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import Client

from tests import helpers
from tests.helpers import exists, route_until_committed  # noqa: F401 - re-exported


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
