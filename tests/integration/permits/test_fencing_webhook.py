"""The built-in ``webhook`` handler sends ``Fencing-Token``; a receiver that keeps the
highest token per resource/slot refuses the expired holder's late request."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from tests.support.runs import event_run, insert_activity, registry_with, start_run
from tests.support.wait import eventually
from workers.handlers import TaskContext
from workers.handlers.builtin import webhook

from .conftest import declare


class FencingReceiver:
    """A downstream that fences: 409 for a token lower than the highest it has seen."""

    def __init__(self) -> None:
        self.highest: dict[str, int] = {}
        self.log: list[tuple[str, int, int]] = []  # (resource/slot, token, status)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        fields = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in head[1:] if h)}
        await reader.readexactly(int(fields.get("content-length", 0)))
        key, token = fields["fencing-resource"], int(fields["fencing-token"])
        status = 409 if token < self.highest.get(key, 0) else 200
        if status == 200:
            self.highest[key] = token
        self.log.append((key, token, status))
        body = orjson.dumps({"highest": self.highest[key]})
        writer.write(f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\n"
                     "Connection: close\r\n\r\n".encode() + body)  # fmt: skip
        await writer.drain()
        writer.close()


async def test_webhook_receiver_rejects_the_stale_fencing_token(
    cfg, temporal, db_pool, permit_worker
):
    resource = await declare(db_pool, capacity=1, lease=2)
    receiver = FencingReceiver()
    server = await asyncio.start_server(receiver.handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/hook"
    tokens: dict[str, int] = {}

    async def handler(ctx: TaskContext) -> None:
        assert ctx.permit is not None
        tokens[ctx.config["role"]] = ctx.permit.token
        if ctx.config["role"] == "a":  # outlive the lease, post after the next holder did

            async def b_posted() -> bool:
                return bool(receiver.log)

            await eventually(b_posted, 30, "b_posted")
        await webhook(ctx)

    def tasks(role: str, lease: int | None) -> list[dict[str, Any]]:
        permit = {"resource": resource, "lease_seconds": lease}
        config = {"role": role, "url": url, "max_attempts": 1}
        return [{"type": "hooked", "permit": permit, "config": config}]

    run_a = event_run(await insert_activity(db_pool, tasks("a", None)))
    run_b = event_run(await insert_activity(db_pool, tasks("b", 30)))
    try:
        async with permit_worker(registry_with(hooked=handler)):
            handle_a = await start_run(temporal, run_a, cfg.temporal.task_queue)
            await eventually(
                lambda: asyncio.sleep(0, "a" in tokens),
                30,
                'lambda: asyncio.sleep(0, "a" in tokens)',
            )
            handle_b = await start_run(temporal, run_b, cfg.temporal.task_queue)
            result_b = await asyncio.wait_for(handle_b.result(), 60)
            result_a = await asyncio.wait_for(handle_a.result(), 60)
    finally:
        server.close()

    key = f"{resource}/0"
    assert tokens["b"] == tokens["a"] + 1
    assert receiver.log == [(key, tokens["b"], 200), (key, tokens["a"], 409)]
    assert (result_b.status, result_a.status) == ("succeeded", "failed")
    error = await db_pool.fetchval(
        "SELECT last_error FROM task_instances WHERE run_id = $1::uuid", run_a.run_id
    )
    assert "HTTP 409" in error
