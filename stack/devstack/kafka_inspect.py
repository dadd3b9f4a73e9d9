"""What a Kafka cluster says about itself: brokers, partition leaders, ISRs, coordinators.

Used by the fault suite's failover scenarios (which broker to kill) and by
``devstack.kafka_cluster`` (is a node up, are its replicas back in sync).
Each query asks the brokers one by one, so a node that was just killed and that
the metadata still lists does not make it fail.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any


async def metadata(bootstrap: str, topics: list[str] | None = None) -> dict[str, Any]:
    """The cluster metadata (brokers, controller, topics with leaders and ISRs)."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.errors import KafkaError
    from aiokafka.protocol.metadata import MetadataRequest

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        await asyncio.wait_for(admin.start(), 10)
        # Ask the brokers one by one: the client's own pick may be a node that
        # was just killed and that the metadata still lists.
        error: Exception = KafkaError("no broker in the metadata")
        for broker in sorted(admin._client.cluster.brokers(), key=lambda b: b.nodeId):
            try:
                md = await asyncio.wait_for(
                    admin._send_request_to_node(broker.nodeId, MetadataRequest(topics)), 5
                )
                return dict(md.to_object())
            except (KafkaError, TimeoutError) as exc:
                error = exc
        raise error
    finally:
        await admin.close()


async def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """Partition -> node id of its leader (-1 while a partition has none)."""
    md = await metadata(bootstrap, [topic])
    (t,) = md["topics"]
    return {p["partition"]: p["leader"] for p in t["partitions"]}


async def under_replicated(bootstrap: str) -> list[str]:
    """``topic/partition`` of every partition whose ISR is smaller than its replica set."""
    md = await metadata(bootstrap)
    return [
        f"{t['topic']}/{p['partition']}"
        for t in md["topics"]
        for p in t["partitions"]
        if p["leader"] < 0 or set(p["isr"]) != set(p["replicas"])
    ]


async def coordinator(bootstrap: str, group: str, timeout: float = 30) -> int:
    """Node id of the broker coordinating consumer group ``group``.

    Retries while the coordinator is not available (the offsets topic being
    created on first use, or its leader moving).
    """
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.errors import KafkaError

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    deadline = time.monotonic() + timeout
    try:
        await asyncio.wait_for(admin.start(), 10)
        while True:
            try:
                return int(await asyncio.wait_for(admin.find_coordinator(group), 10))
            except KafkaError as exc:
                if not exc.retriable or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.5)
    finally:
        await admin.close()
