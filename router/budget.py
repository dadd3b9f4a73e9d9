"""The bytes of the messages a router (or a replay) holds in flight: a bound in bytes.

A bound in records alone (``INGEST_ROUTER_MAX_IN_FLIGHT``) holds up to 4 GB of 1 MB
events during a Temporal outage; the byte budget (``INGEST_ROUTER_MAX_IN_FLIGHT_BYTES``)
pauses fetching as well once the unfinished messages' keys, values and headers reach
it. A message's bytes are released when its task ends however it ends (done,
dead-lettered, cancelled on a revoke or at shutdown), so nothing leaks.
"""

from __future__ import annotations

import asyncio

from aiokafka.structs import ConsumerRecord

from pipeline.kafka import record_bytes


class InFlightBytes:
    """The bytes of the messages whose tasks have not ended, against ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    @property
    def full(self) -> bool:
        return self.used >= self.limit

    def hold(self, msg: ConsumerRecord, task: asyncio.Task[None]) -> None:
        """Count ``msg`` until ``task`` ends."""
        size = record_bytes(msg)
        self.used += size
        task.add_done_callback(lambda _t: self._release(size))

    def _release(self, size: int) -> None:
        self.used -= size
