"""Webhook secrets by reference through a real run (``workers/handlers/webhook_secrets.py``):
on the stack's Temporal and PostgreSQL, with the production worker and a local receiver.

* ``headers_from_env`` and ``headers_from_file`` reach the receiver, resolved by the
  activity: no value is in any event of the run's or its tasks' histories (read raw, no
  codec), only the names.
* A URL given by ``url_from_env`` that cannot be reached fails its task with the URL
  redacted (userinfo, path, query) in ``task_instances.last_error``, and neither its
  password nor its token is anywhere in Temporal, the failure included.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI, Request, Response
from temporalio.client import Client

from schemas.ids import task_workflow_id
from tests.support.net import free_port
from tests.support.runs import event_run, insert_activity, start_run
from tests.support.wait import eventually

TOKEN = "Bearer it-token-5b1e7d0c"
API_KEY = "it-api-key-93aa41"
PASSWORD, QUERY_TOKEN = "it-pw-7c2d", "it-qtok-e81f"


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[str, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []
    app = FastAPI()

    @app.post("/hook")
    async def hook(request: Request) -> Response:
        seen.append(dict(request.headers))
        return Response(status_code=204)

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    task = asyncio.create_task(server.serve())

    async def started() -> bool:
        return server.started

    await eventually(started, 10, "the receiver")
    yield f"http://127.0.0.1:{port}/hook", seen
    server.should_exit = True
    await asyncio.wait_for(task, 10)


async def _history_bytes(client: Client, workflow_id: str) -> bytes:
    events = [e async for e in client.get_workflow_handle(workflow_id).fetch_history_events()]
    assert events, workflow_id
    return b"".join(e.SerializeToString() for e in events)


async def test_secrets_resolve_in_the_activity_and_stay_out_of_temporal(
    cfg: Any,
    temporal: Client,
    db_pool: Any,
    worker: Any,
    receiver: tuple[str, list[dict[str, str]]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, seen = receiver
    monkeypatch.setenv("WEBHOOK_IT_TOKEN", TOKEN)
    dead = f"http://user:{PASSWORD}@127.0.0.1:{free_port()}/x/{QUERY_TOKEN}?token={QUERY_TOKEN}"
    monkeypatch.setenv("WEBHOOK_IT_DEAD_URL", dead)
    (tmp_path / "api-key").write_text(API_KEY + "\n")
    activity_id = await insert_activity(
        db_pool,
        [
            {
                "type": "webhook",
                "config": {
                    "url": url,
                    "headers_from_env": {"Authorization": "WEBHOOK_IT_TOKEN"},
                    "headers_from_file": {"X-Api-Key": "api-key"},
                },
            },
            {
                "type": "webhook",
                "config": {"url_from_env": "WEBHOOK_IT_DEAD_URL", "max_attempts": 1},
            },
        ],
    )
    run = event_run(activity_id)
    async with worker(webhook_secrets_dir=str(tmp_path)):
        handle = await start_run(temporal, run, cfg.temporal.task_queue)
        result = await asyncio.wait_for(handle.result(), 90)
    assert (result.status, result.tasks_succeeded, result.tasks_failed) == ("failed", 1, 1)

    (headers,) = seen
    assert headers["authorization"] == TOKEN
    assert headers["x-api-key"] == API_KEY

    rows = {
        r["index"]: r
        for r in await db_pool.fetch(
            "SELECT index, status, last_error FROM task_instances WHERE run_id = $1::uuid",
            run.run_id,
        )
    }
    assert rows[0]["status"] == "succeeded"
    assert rows[1]["status"] == "failed"
    error = rows[1]["last_error"]
    assert "http://***@127.0.0.1:" in error and "/***" in error and "ConnectError" in error
    for secret in (PASSWORD, QUERY_TOKEN):
        assert secret not in error

    workflow_ids = [run.workflow_id] + [
        task_workflow_id(run.run_id, "webhook", i) for i in range(2)
    ]
    history = b"".join([await _history_bytes(temporal, w) for w in workflow_ids])
    assert b"WEBHOOK_IT_TOKEN" in history  # the reference travels, not the value
    for secret in (TOKEN, API_KEY, PASSWORD, QUERY_TOKEN):
        assert secret.encode() not in history, secret
