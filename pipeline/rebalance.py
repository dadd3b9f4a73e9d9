"""The consumer-group rebalance listener of ingress and the router.

Each service owns what a revoke means for it (finish or drain in-flight work,
commit, forget the partitions) in its own ``on_revoked``; this listener only hands
the revoked partitions over, and logs an assignment (the fault tests wait for
that line).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiokafka import ConsumerRebalanceListener
from aiokafka.structs import TopicPartition

log = logging.getLogger(__name__)


class Delegating(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, on_revoked: Callable[[set[TopicPartition]], Awaitable[None]]) -> None:
        self._on_revoked = on_revoked

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._on_revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        log.info("assigned %s", sorted((tp.topic, tp.partition) for tp in assigned))
