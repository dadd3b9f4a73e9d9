"""Cancelled and timed-out runs in the listings: the ops API's run listing filters by
the new statuses and carries ``ended_by`` (listing and detail); ``GET /api/flow`` and
``ingest flow list`` count each activity's runs cancelled and timed out in the last
hour, and ``ingest flow list`` shows what the activity declares (its cancel_on rules,
timeouts). The rows are written as ``end_run`` writes them (workers/store.py); the
runs' own lifecycle is tested in test_cancel_on.py and test_timeouts.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from typing import Any

import httpx
from pydantic import SecretStr

from ops.app import OpsDeps
from ops.service import OpsServer
from ops.settings import OpsSettings
from tests.support import ROOT, db

FLOW = {
    "cancel_on": [{"event_type": "order.cancelled", "match": {"data.id": "data.order_id"}}],
    "timeouts": {"start": "10m", "finish": "1h"},
}


async def _run(pool: Any, aid: str, wid: str, status: str, ended_by: str | None) -> str:
    run_id = uuid.uuid4()
    await pool.execute(
        "INSERT INTO activity_runs (run_id, activity_id, workflow_id, trigger_kind, status,"
        " ended_by, finished_at) VALUES ($1, $2::uuid, $3, 'event', $4, $5,"
        " CASE WHEN $4 <> 'running' THEN now() END)",
        run_id,
        aid,
        wid,
        status,
        ended_by,
    )
    return str(run_id)


async def _cli(cfg: Any, *args: str) -> str:
    env = {**os.environ, "DATABASE_URL": cfg.database.url.get_secret_value()}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.cli", "flow", "list", *args,
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_cancelled_and_timed_out_runs_are_listed_with_what_ended_them(cfg, temporal, db_pool):
    tag = uuid.uuid4().hex[:8]
    aid = await db.seed_activity(db_pool, f"cl.{tag}", flow=FLOW)
    cancelled = await _run(db_pool, aid, f"c-{tag}", "cancelled", f"cancel_on:ev-{tag}")
    timed_out = await _run(db_pool, aid, f"t-{tag}", "timed_out", "timeout:finish")
    await _run(db_pool, aid, f"s-{tag}", "succeeded", None)

    ops = OpsSettings(host="127.0.0.1", port=0, token=SecretStr("t" * 32))  # 32 at least
    server = OpsServer(OpsDeps(temporal, db_pool, cfg, ops))
    await server.start()
    try:
        headers = {"Authorization": "Bearer " + "t" * 32}
        async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60) as http:

            async def get(path: str, **params: str) -> Any:
                resp = await http.get(path, params=params)
                assert resp.status_code == 200, resp.text
                return resp.json()

            by_status = {
                s: (await get("/api/runs", activity=aid, status=s))["runs"]
                for s in ("cancelled", "timed_out", "succeeded")
            }
            detail = await get(f"/api/runs/{timed_out}")
            flow = await get("/api/flow", activity=aid)
    finally:
        await server.stop()
    assert [(r["run_id"], r["status"], r["ended_by"]) for r in by_status["cancelled"]] == [
        (cancelled, "cancelled", f"cancel_on:ev-{tag}")
    ]
    assert [(r["run_id"], r["ended_by"]) for r in by_status["timed_out"]] == [
        (timed_out, "timeout:finish")
    ]
    assert [r["ended_by"] for r in by_status["succeeded"]] == [None]
    assert (detail["run"]["status"], detail["run"]["ended_by"]) == ("timed_out", "timeout:finish")
    [row] = flow["keys"]
    assert (row["key"], row["cancelled_last_hour"], row["timed_out_last_hour"]) == ("", 1, 1)

    doc = json.loads(await _cli(cfg, "--activity", aid, "--json"))
    assert [(r["cancelled_last_hour"], r["timed_out_last_hour"]) for r in doc["keys"]] == [(1, 1)]
    [ends] = doc["ends"]
    assert ends["cancel_on"] == FLOW["cancel_on"]
    assert ends["timeouts"] == {"start": 600.0, "finish": 3600.0}
    text = await _cli(cfg, "--activity", aid)
    assert "CANCEL/H" in text.splitlines()[0] and "TMOUT/H" in text.splitlines()[0]
    assert "cancel_on order.cancelled where data.id = data.order_id" in text
    assert "timeouts start 10m, finish 1h" in text
