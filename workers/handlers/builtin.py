"""Built-in task handlers: ``noop``, ``fail``, ``emit`` (Kafka) and ``webhook`` (HTTP POST).

``noop``, ``fail`` and ``emit`` are short (``register(short=True)``): their tasks
run them as local activities. ``webhook`` waits on a remote server for up to its
timeout, so it stays a regular, heartbeating activity.

``emit`` config: ``topic`` (default ``INGEST_EMIT_TOPIC``). The message value is
the task payload as JSON, the key is the task id (stable across retries, so a
consumer can drop the at-least-once repeats), headers carry ``task_id``,
``run_id``, ``activity_id``, ``task_type`` and ``idempotency_key`` when set.

``webhook`` config: ``url`` (required), ``headers`` (optional dict),
``request_timeout_seconds`` (default 10). It POSTs the payload as JSON with
``Idempotency-Key: <task id>``, and, when the task holds a permit,
``Fencing-Token`` and ``Fencing-Resource`` (see ``workers.permits.fencing``).
2xx is success; 408, 429, 5xx and network errors are retried; any other status
(e.g. 409 from a receiver rejecting a stale fencing token) fails the task without retry.
"""

from __future__ import annotations

import httpx
import orjson

from workers.handlers.base import TaskContext, register
from workers.handlers.errors import PermanentTaskError, RetryableTaskError


@register("noop", short=True)
async def noop(ctx: TaskContext) -> None:
    """Does nothing: for demos, benchmarks and tests of the workflow machinery."""


@register("fail", short=True)
async def fail(ctx: TaskContext) -> None:
    """Always fails permanently (config ``message``): tests and alert drills."""
    raise PermanentTaskError(str(ctx.config.get("message", "the fail handler always fails")))


@register("emit", short=True)
async def emit(ctx: TaskContext) -> None:
    topic = ctx.config.get("topic") or ctx.resources.emit_topic
    if not isinstance(topic, str) or not topic:
        raise PermanentTaskError(f"emit: config.topic must be a non-empty string, got {topic!r}")
    headers = [
        ("task_id", ctx.task_id.encode()),
        ("run_id", ctx.run_id.encode()),
        ("activity_id", ctx.activity_id.encode()),
        ("task_type", ctx.spec.task_type.encode()),
    ]
    if ctx.spec.idempotency_key is not None:
        headers.append(("idempotency_key", ctx.spec.idempotency_key.encode()))
    producer = await ctx.resources.producer()
    await producer.send_and_wait(
        topic, orjson.dumps(ctx.payload), key=ctx.task_id.encode(), headers=headers
    )


def check_status(status: int, body: str = "") -> None:
    """Raise the error class a webhook response status deserves (None for 2xx)."""
    if 200 <= status < 300:
        return
    detail = f"webhook answered HTTP {status}: {body[:200]}".rstrip(": ")
    if status in (408, 429) or status >= 500:
        raise RetryableTaskError(detail)
    raise PermanentTaskError(detail)


@register("webhook")
async def webhook(ctx: TaskContext) -> None:
    url = ctx.config.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise PermanentTaskError(f"webhook: config.url must be an http(s) URL, got {url!r}")
    extra = ctx.config.get("headers") or {}
    if not isinstance(extra, dict):
        raise PermanentTaskError("webhook: config.headers must be an object")
    headers = {str(k): str(v) for k, v in extra.items()}
    headers["Idempotency-Key"] = ctx.task_id
    if ctx.permit is not None:
        headers.update(ctx.permit.headers())
    headers["Content-Type"] = "application/json"
    timeout = float(ctx.config.get("request_timeout_seconds", 10))
    try:
        resp = await ctx.resources.http().post(
            url, content=orjson.dumps(ctx.payload), headers=headers, timeout=timeout
        )
    except httpx.TransportError as exc:
        raise RetryableTaskError(f"webhook {url}: {type(exc).__name__}: {exc}") from exc
    check_status(resp.status_code, resp.text)


BUILTINS = [noop, fail, emit, webhook]
