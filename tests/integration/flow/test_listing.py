"""``ingest flow list`` and the ops API's ``GET /api/flow`` show the same state: the next
throttle slot per key, the rate limit's free triggers, singleton holders, recent skips."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid

import httpx
from pydantic import SecretStr

from ops.app import OpsDeps
from ops.service import OpsServer
from ops.settings import OpsSettings
from router.flow.keys import read_keys
from router.flow.store import FlowStore
from schemas.flow.spec import FlowDef
from schemas.workflow_io import RunActivityInput
from tests.support import ROOT, db

FLOW = {
    "throttle": {"limit": 1, "period": "60s", "key": "data.c"},
    "rate_limit": {"limit": 2, "period": "60s"},
    "singleton": {"mode": "skip", "key": "data.c"},
}


async def _decide(pool, aid: str, n: int, c: str) -> None:
    store, flow = FlowStore(pool), FlowDef.model_validate(FLOW)
    for i in range(n):
        event = {"type": "t", "data": {"c": c}}
        run = RunActivityInput.for_event(aid, f"e-{c}-{i}", event)
        await store.decide(run, read_keys(flow, event))


async def test_cli_and_api_list_throttle_rate_limit_singleton_and_skips(cfg, temporal, db_pool):
    aid = await db.seed_activity(db_pool, f"ls.{uuid.uuid4().hex[:8]}", flow=FLOW)
    # Keys a and b: one start each (its throttle slot taken, the next one ~60 s away;
    # each holds its singleton key).
    await _decide(db_pool, aid, 1, "a")
    await _decide(db_pool, aid, 1, "b")
    # A third trigger exceeds the rate limit (2 per 60 s, no key): skipped.
    await _decide(db_pool, aid, 1, "c")

    env = {**os.environ, "DATABASE_URL": cfg.database.url.get_secret_value()}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.cli", "flow", "list", "--activity", aid, "--json",
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    doc = json.loads(out)
    by_key = {r["key"]: r for r in doc["keys"]}
    assert all(0 < by_key[k]["next_throttle_slot"] <= 60 for k in "ab")
    assert by_key["a"]["singleton_holder"] and by_key["b"]["singleton_holder"]
    assert by_key[""]["rate_limit_free"] == 0
    assert by_key[""]["skips_last_hour"] == 1
    assert by_key["a"]["slots_in_use"] is None  # the concurrency control fills it
    [skip] = doc["skips"]
    assert (skip["reason"], skip["event_id"], skip["key"]) == ("rate_limit", "e-c-0", "")

    ops = OpsSettings(host="127.0.0.1", port=0, token=SecretStr("t" * 32))  # 32 at least
    server = OpsServer(OpsDeps(temporal, db_pool, cfg, ops))
    await server.start()
    try:
        headers = {"Authorization": "Bearer " + "t" * 32}
        async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60) as http:
            got = await http.get("/api/flow", params={"activity": aid})
    finally:
        await server.stop()
    assert got.status_code == 200, got.text
    api = got.json()
    assert [k["key"] for k in api["keys"]] == [k["key"] for k in doc["keys"]]
    assert [s["workflow_id"] for s in api["skips"]] == [skip["workflow_id"]]

    # The table form names the columns the other controls fill.
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.cli", "flow", "list",
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    text, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    head = text.decode().splitlines()[0].split()
    assert (
        head[:2] == ["ACTIVITY", "KEY"]
        and "IN USE" in text.decode()
        and "rate_limit" in text.decode()
    )
