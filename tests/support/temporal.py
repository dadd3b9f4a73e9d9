"""Temporal helpers."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from temporalio.service import RPCError, RPCStatusCode


async def exists(client: Any, wid: str) -> bool:
    """Temporal still knows this workflow id.

    Only NOT_FOUND means "no": any other error (Temporal down, a timeout) is raised,
    so ``assert not await exists(...)`` cannot pass because the server was unreachable.
    """
    try:
        await client.get_workflow_handle(wid).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


async def forget(client: Any, wids: list[str]) -> None:
    """Delete the executions, as retention would, and wait until Temporal no longer knows them."""
    from temporalio.api.common.v1 import WorkflowExecution
    from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest

    from tests.support.wait import eventually

    for wid in wids:
        await client.workflow_service.delete_workflow_execution(
            DeleteWorkflowExecutionRequest(
                namespace=client.namespace, workflow_execution=WorkflowExecution(workflow_id=wid)
            )
        )

    async def all_gone() -> bool:
        return not any([await exists(client, w) for w in wids])

    await eventually(all_gone, 60, "Temporal to forget the deleted workflows")


@contextlib.contextmanager
def private_server(home: Path, dynamic_config: tuple[str, ...] = ()) -> Iterator[str]:
    """A private, in-memory dev server on a free port (no UI), started through the stack's
    own ``Temporal`` service with ``INGEST_STACK_TEMPORAL_DYNAMIC_CONFIG``-style
    ``KEY=VALUE`` pairs; yields its address and stops it at the end. The shared stack
    is never touched."""
    from devstack.settings import StackSettings
    from devstack.temporal import Temporal

    from tests.support.net import free_port

    cfg = StackSettings(
        dir=home,
        temporal_port=free_port(),
        temporal_ui=False,
        temporal_dynamic_config=dynamic_config,
    )
    server = Temporal(cfg, persist=False)
    server.ensure()
    try:
        yield server.address
    finally:
        server.stop()
