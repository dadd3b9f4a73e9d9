"""What a task handler is given, the shared clients it may use, and its error classes.

A handler is ``async def handler(ctx: TaskContext) -> None``. Returning means done.
Raising :class:`PermanentTaskError` fails the task at once (no retry); any other
exception is retried by Temporal with the task's backoff (``workers.options``).
Handlers run at least once per task: an attempt can succeed and then be retried
if the worker dies before Temporal records it, so side effects should carry
``ctx.task_id`` (stable across retries) for the receiver to dedupe on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
from aiokafka import AIOKafkaProducer

from schemas.workflow_io import TaskSpec

if TYPE_CHECKING:
    from workers.permits.fencing import Permit


class TaskError(Exception):
    """Base of handler errors; ``retriable`` is a property of the class."""

    retriable = True


class PermanentTaskError(TaskError):
    """Retrying cannot help (bad config, rejected request): fail the task now."""

    retriable = False


class RetryableTaskError(TaskError):
    """A transient failure (5xx, timeout): let Temporal retry with backoff."""


class Resources:
    """Clients shared by every handler in one worker, built on first use, closed once."""

    def __init__(
        self,
        producer_factory: Callable[[], AIOKafkaProducer] | None = None,
        emit_topic: str = "ingest.tasks",
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self._producer_factory = producer_factory
        self._producer: AIOKafkaProducer | None = None
        self._lock = asyncio.Lock()
        self._http = http_client
        self._own_http = http_client is None
        self.emit_topic = emit_topic

    async def producer(self) -> AIOKafkaProducer:
        async with self._lock:
            if self._producer is None:
                if self._producer_factory is None:
                    raise PermanentTaskError("this worker has no Kafka producer configured")
                producer = self._producer_factory()
                await producer.start()
                self._producer = producer
            return self._producer

    def http(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=10.0)
        return self._http

    async def close(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None
        if self._http is not None and self._own_http:
            await self._http.aclose()
            self._http = None


@dataclass(frozen=True)
class TaskContext:
    task_id: str  # task-{run_id}:{task_type}:{index}, stable across retries
    run_id: str
    activity_id: str
    spec: TaskSpec
    attempt: int  # 1 on the first attempt
    resources: Resources
    # The permit held while the handler runs (tasks with ``permit:``), else None.
    permit: Permit | None = None

    @property
    def payload(self) -> dict[str, Any]:
        return self.spec.payload

    @property
    def config(self) -> dict[str, Any]:
        return self.spec.config


Handler = Callable[[TaskContext], Awaitable[None]]
