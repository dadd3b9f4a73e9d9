"""Built-in task handlers: ``noop``, ``fail``, ``emit`` (Kafka) and ``webhook`` (HTTP POST).

``noop``, ``fail`` and ``emit`` are short (``register(short=True)``): their tasks
run them as local activities. ``webhook`` waits on a remote server for up to its
timeout, so it stays a regular, heartbeating activity.

``emit`` config: ``topic`` (default ``INGEST_EMIT_TOPIC``) and ``key`` (a template
over the trigger context like ``idempotency_key``, e.g. ``"{data.order_id}"``;
default the task id). The message value is the task payload as JSON; headers carry ``task_id``
(the dedupe id), ``run_id``, ``activity_id``, ``task_type`` and ``idempotency_key``
when set. ``emit`` does not publish: it stages the message, and the ``run_handler``
activity writes it to the ``outbox`` table in the transaction that marks the task
succeeded; ``ingest relay`` publishes it with a transactional producer, so a
``read_committed`` consumer sees it exactly once (docs/kafka.md).

``webhook`` config: ``url`` (or ``url_from_env`` / ``url_from_file``), ``headers``
(optional dict), ``headers_from_env`` / ``headers_from_file`` (header -> variable or
file holding its value, read by the activity at call time: credentials never enter
Temporal history; see :mod:`workers.handlers.webhook_secrets`),
``request_timeout_seconds`` (default 10). It POSTs the payload as JSON with
``Idempotency-Key: <task id>``, and, when the task holds a permit,
``Fencing-Token`` and ``Fencing-Resource`` (see ``workers.permits.fencing``).
2xx is success; 408, 429, 5xx and network errors are retried; any other status
(e.g. 409 from a receiver rejecting a stale fencing token) fails the task without retry.
Its errors quote the URL redacted (userinfo, query values, fragment) and never a
resolved secret: they reach ``task_instances.last_error``, the logs and Temporal.
"""

from __future__ import annotations

import logging

import httpx
import orjson

from workers.handlers.base import TaskContext, register
from workers.handlers.errors import PermanentTaskError, RetryableTaskError
from workers.handlers.webhook_secrets import (
    Scrubber,
    literal_secret_headers,
    resolve_headers,
    resolve_url,
)
from workers.store import OutboxMessage
from workers.templates import TemplateError, render

log = logging.getLogger(__name__)


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
    key = _emit_key(ctx)
    ctx.stage(
        OutboxMessage(ctx.task_id, topic, key.encode(), tuple(headers), orjson.dumps(ctx.payload))
    )


def _emit_key(ctx: TaskContext) -> str:
    """``config.key`` rendered over the trigger context (as idempotency keys are), else
    the task id."""
    template = ctx.config.get("key")
    if template is None:
        return ctx.task_id
    if not isinstance(template, str) or not template:
        raise PermanentTaskError(f"emit: config.key must be a non-empty string, got {template!r}")
    event = ctx.payload.get("event") or {}
    context = {**event, **(ctx.payload.get("trigger") or {}), "event": event}
    try:
        return render(template, context)
    except TemplateError as exc:
        raise PermanentTaskError(f"emit: config.key {template!r}: {exc}") from None


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
    url, by_reference = resolve_url(ctx.config, ctx.resources.secrets)
    headers, secrets = resolve_headers(ctx.config, ctx.resources.secrets)
    scrub = Scrubber(url, secrets, by_reference=by_reference)
    _warn_literal_secrets(ctx)
    headers["Idempotency-Key"] = ctx.task_id
    if ctx.permit is not None:
        headers.update(ctx.permit.headers())
    headers["Content-Type"] = "application/json"
    timeout = float(ctx.config.get("request_timeout_seconds", 10))
    # Every message below quotes the URL redacted and the exception's text scrubbed, and
    # drops the exception chain (``from None``): Temporal's failure would carry the cause.
    try:
        resp = await ctx.resources.http().post(
            url, content=orjson.dumps(ctx.payload), headers=headers, timeout=timeout
        )
    except httpx.InvalidURL as exc:
        raise PermanentTaskError(f"webhook {scrub.shown}: invalid URL: {scrub(str(exc))}") from None
    except httpx.HTTPError as exc:
        raise RetryableTaskError(
            f"webhook {scrub.shown}: {type(exc).__name__}: {scrub(str(exc))}"
        ) from None
    check_status(resp.status_code, scrub(resp.text))


def _warn_literal_secrets(ctx: TaskContext) -> None:
    """One warning per worker, activity and header for a credential written in the definition."""
    for name in literal_secret_headers(ctx.config):
        key = ("webhook-literal-secret", ctx.activity_id, name.lower())
        if key not in ctx.resources.warned:
            ctx.resources.warned.add(key)
            log.warning(
                "activity %s: webhook header %r is written in the definition, so it is stored "
                "in Temporal history and the activities table; name it in headers_from_env or "
                "headers_from_file instead (docs/workers.md)",
                ctx.activity_id,
                name,
            )


BUILTINS = [noop, fail, emit, webhook]
