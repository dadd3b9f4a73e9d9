"""Schedules under the payload codec, on the stack's dev server (``scheduler.sync``).

A schedule's action (the dispatcher's input and the fingerprint memo) is written by the
client's converter, so with the codec on it is encrypted; ``reconcile`` decodes the memo
through the same converter, so a second sync changes nothing. A schedule written in
plaintext (before the codec) or under a key being rotated out is rewritten once, under
the encrypting key, and then left alone.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.client import Client, ScheduleActionStartWorkflow
from temporalio.service import RPCError

from definitions import store
from pipeline.clients import temporal_client
from pipeline.codec import KEY_ID_META, is_encrypted
from pipeline.settings import TemporalSettings
from scheduler import sync
from scheduler.spec import FINGERPRINT_MEMO
from schemas.definitions import ActivityDef
from schemas.ids import schedule_id

OLD = f"old-{uuid.uuid4().hex[:6]}:{base64.b64encode(os.urandom(32)).decode()}"
NEW = f"new-{uuid.uuid4().hex[:6]}:{base64.b64encode(os.urandom(32)).decode()}"


async def _client(stack: Any, monkeypatch: pytest.MonkeyPatch, keys: str | None) -> Client:
    monkeypatch.delenv("INGEST_CODEC_KEYS_FILE", raising=False)
    if keys is None:
        monkeypatch.delenv("INGEST_CODEC_KEYS", raising=False)
    else:
        monkeypatch.setenv("INGEST_CODEC_KEYS", keys)
    return await temporal_client(
        TemporalSettings(address=stack.temporal, namespace=stack.namespace)
    )


@pytest.fixture
async def cron_activity(temporal: Client, db_pool: Any) -> AsyncIterator[ActivityDef]:
    aid = uuid.uuid4()
    act = ActivityDef.model_validate(
        {"id": aid, "name": f"cron {str(aid)[:8]}", "tasks": [{"type": "noop"}],
         "trigger": {"type": "cron", "cron": "0 3 1 1 *"}}
    )  # fmt: skip
    await store.upsert(db_pool, [act])
    yield act
    try:
        await temporal.get_schedule_handle(schedule_id(aid)).delete()
    except RPCError:
        pass


async def _memo_key_id(client: Client, act: ActivityDef) -> str | None:
    desc = await client.get_schedule_handle(schedule_id(act.id)).describe()
    action = desc.schedule.action
    assert isinstance(action, ScheduleActionStartWorkflow)
    memo = (action.memo or {})[FINGERPRINT_MEMO]  # raw payloads in a described action
    return memo.metadata[KEY_ID_META].decode() if is_encrypted(memo) else None


async def _sync(client: Client, db_pool: Any, task_queue: str) -> list[str]:
    return [c.action for c in await sync.reconcile(client, db_pool, task_queue)]


async def test_sync_encrypts_rotates_and_is_idempotent(
    stack: Any,
    db_pool: Any,
    task_queue: str,
    cron_activity: ActivityDef,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plain = await _client(stack, monkeypatch, None)
    assert await _sync(plain, db_pool, task_queue) == ["created"]
    assert await _memo_key_id(plain, cron_activity) is None  # plaintext

    old = await _client(stack, monkeypatch, OLD)
    assert await _sync(old, db_pool, task_queue) == ["updated"]  # encrypted now
    assert await _memo_key_id(old, cron_activity) == OLD.split(":")[0]
    assert await _sync(old, db_pool, task_queue) == []  # decodes: nothing to change

    # Rotation, step 1: the new key listed last decrypts but does not encrypt.
    both = await _client(stack, monkeypatch, f"{OLD},{NEW}")
    assert await _sync(both, db_pool, task_queue) == []
    # Step 2: the new key first: the schedule is rewritten under it, once.
    rotated = await _client(stack, monkeypatch, f"{NEW},{OLD}")
    assert await _sync(rotated, db_pool, task_queue) == ["updated"]
    assert await _memo_key_id(rotated, cron_activity) == NEW.split(":")[0]
    assert await _sync(rotated, db_pool, task_queue) == []
    # Step 3: the old key dropped: nothing still needs it.
    new_only = await _client(stack, monkeypatch, NEW)
    assert await _sync(new_only, db_pool, task_queue) == []
    # The dispatcher's input is under the new key too: the run input a fire would carry.
    desc = await new_only.get_schedule_handle(schedule_id(cron_activity.id)).describe()
    action = desc.schedule.action
    assert isinstance(action, ScheduleActionStartWorkflow)
    (arg,) = action.args
    assert arg.metadata[KEY_ID_META].decode() == NEW.split(":")[0]
    assert (await new_only.data_converter.decode([arg]))[0]["activity_id"] == str(cron_activity.id)
