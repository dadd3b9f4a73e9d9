"""What a task handler is given, and the shared clients it may use.

Its error classes are in :mod:`workers.handlers.errors`.

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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
from aiokafka import AIOKafkaProducer

from schemas.workflow_io import TaskSpec
from workers.handlers.errors import PermanentTaskError
from workers.handlers.webhook_secrets import SecretSource
from workers.store import OutboxMessage

if TYPE_CHECKING:
    from workers.permits.fencing import Permit


class Resources:
    """Clients shared by every handler in one worker, built on first use, closed once."""

    def __init__(
        self,
        producer_factory: Callable[[], AIOKafkaProducer] | None = None,
        emit_topic: str = "ingest.tasks",
        http_client: httpx.AsyncClient | None = None,
        secrets: SecretSource | None = None,
    ) -> None:
        self._producer_factory = producer_factory
        self._producer: AIOKafkaProducer | None = None
        self._lock = asyncio.Lock()
        self._http = http_client
        self._own_http = http_client is None
        self.emit_topic = emit_topic
        # Where a webhook's headers_from_env / headers_from_file resolve (INGEST_WEBHOOK_*).
        self.secrets = secrets or SecretSource()
        # What a handler warned about once already (e.g. a literal credential header).
        self.warned: set[tuple[str, ...]] = set()

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
    # What the handler staged for the outbox (``stage``): written by the run_handler
    # activity in the same transaction that marks the task succeeded.
    staged: list[OutboxMessage] = field(default_factory=list)

    def stage(self, message: OutboxMessage) -> None:
        """Publish ``message`` exactly once, through the outbox (``ingest relay``)."""
        self.staged.append(message)

    @property
    def payload(self) -> dict[str, Any]:
        return self.spec.payload

    @property
    def config(self) -> dict[str, Any]:
        return self.spec.config


Handler = Callable[[TaskContext], Awaitable[None]]


_ATTR = "__ingest_task_type__"
_SHORT = "__ingest_short__"
F = TypeVar("F", bound=Callable[..., Any])


def register(name: str, *, short: bool = False) -> Callable[[F], F]:
    """Tag an async function as the handler of task type ``name``.

    It only tags the function (no global state): importing a module of handlers
    has no side effects, and each worker builds its own registry from the tags.

    ``short=True`` declares the handler short (it finishes in well under a
    workflow task timeout, needs no heartbeat) and idempotent per ``ctx.task_id``.
    Its tasks then run the handler as a *local* activity inside their child
    workflow: no activity task to schedule, poll and complete on the server
    (see ``TaskInstanceWorkflow._execute``). A local activity is retried from
    the start after a worker crash, like any attempt, so the at-least-once
    contract above is unchanged.
    """
    if not name:
        raise ValueError("task type must be a non-empty string")

    def tag(fn: F) -> F:
        setattr(fn, _ATTR, name)
        if short:
            setattr(fn, _SHORT, True)
        return fn

    return tag


def task_type_of(fn: Callable[..., Any]) -> str:
    """The task type ``fn`` was registered for (``@register``), else its name."""
    return str(getattr(fn, _ATTR, None) or getattr(fn, "__name__", ""))


def is_registered(fn: object) -> bool:
    return bool(getattr(fn, _ATTR, None))


def is_short(fn: object) -> bool:
    """Whether ``fn`` was registered with ``short=True``."""
    return bool(getattr(fn, _SHORT, False))
