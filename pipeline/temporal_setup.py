"""``ingest temporal setup``: what the pipeline needs registered on a Temporal namespace.

Today that is the Keyword search attributes of pause-and-fix
(``schemas.search_attributes``): a paused task upserts them, and the ops service
finds paused tasks with them. Registration goes through the operator service and
is idempotent: attributes already there are left alone, so every deploy may run it.

* The local stack passes :func:`start_dev_flags` to ``temporal server start-dev``
  and also calls :func:`register_search_attributes` on a dev server that was
  already running (started before the attributes existed).
* On a real cluster, run ``ingest temporal setup`` once per namespace (the
  Kubernetes migrate job does, after ``ingest migrate``). Temporal Cloud manages
  search attributes through its own cloud operations API or UI instead: there,
  create the three Keyword attributes by hand.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from google.protobuf.duration_pb2 import Duration
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from schemas.search_attributes import KEYWORDS


def start_dev_flags() -> list[str]:
    """``--search-attribute Name=Keyword`` for each attribute, for ``start-dev``."""
    return [arg for name in KEYWORDS for arg in ("--search-attribute", f"{name}=Keyword")]


async def register_search_attributes(client: Client, namespace: str) -> list[str]:
    """Add the attributes the namespace lacks; returns the names added (empty: all there)."""
    ops = client.operator_service
    have = await ops.list_search_attributes(ListSearchAttributesRequest(namespace=namespace))
    missing = [name for name in KEYWORDS if name not in have.custom_attributes]
    if missing:
        keyword = IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD
        await ops.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=namespace, search_attributes=dict.fromkeys(missing, keyword)
            )
        )
    return missing


async def register_namespace(
    client: Client, namespace: str, retention: timedelta, description: str = ""
) -> bool:
    """Register ``namespace`` with ``retention``; False if it already exists (left as it is).

    A real server starts with no ``default`` namespace (the dev server makes one);
    ``temporal operator namespace create`` fails on an existing one, this does not.
    """
    try:
        await client.workflow_service.register_namespace(
            RegisterNamespaceRequest(
                namespace=namespace,
                description=description,
                workflow_execution_retention_period=Duration(
                    seconds=int(retention.total_seconds())
                ),
            )
        )
    except RPCError as exc:
        if exc.status == RPCStatusCode.ALREADY_EXISTS:
            return False
        raise
    return True


async def prepare_namespace(
    client: Client, namespace: str, retention: timedelta, description: str = ""
) -> None:
    """Register ``namespace`` (idempotent) and the pipeline's search attributes in it, and
    return once it serves: a new namespace reaches each service's registry seconds later
    on a real server, and until then calls on it answer NOT_FOUND or INVALID_ARGUMENT."""
    await register_namespace(client, namespace, retention, description)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while True:
        try:
            await register_search_attributes(client, namespace)
            await client.count_workflows()
            return
        except RPCError as exc:
            waiting = exc.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT)
            if not waiting or loop.time() > deadline:
                raise
        await asyncio.sleep(0.5)


def register_on(address: str, namespace: str = "default") -> list[str]:
    """Synchronous form for the local stack (``devstack``)."""

    async def go() -> list[str]:
        client = await Client.connect(address, namespace=namespace)
        return await register_search_attributes(client, namespace)

    return asyncio.run(go())
