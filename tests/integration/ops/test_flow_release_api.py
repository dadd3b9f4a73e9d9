"""Releasing a blocked flow.ordered line from the ops API: the token is required, the
failed head's place is closed and recorded with the actor, the next run's turn comes."""

from __future__ import annotations

import uuid

import httpx

from router.flow.order import OrderLines, PlaceRequest
from schemas.workflow_io import RunActivityInput
from tests.support import db
from workers.flow import order_store


async def test_release_needs_the_token(ops_api):
    async with httpx.AsyncClient(base_url=ops_api.url, timeout=30) as anonymous:
        resp = await anonymous.post("/api/flow/x/release", json={"key": "k"})
        assert resp.status_code == 401, resp.status_code


async def test_release_lets_a_blocked_line_go_on(db_pool, ops_api):
    name = f"ordered.{uuid.uuid4().hex[:8]}"
    aid = await db.seed_activity(db_pool, name, flow={"ordered": {"key": "data.order"}})
    runs = [
        RunActivityInput.for_event(aid, f"e{i}", {"type": name, "event_id": f"e{i}", "data": {}})
        for i in range(3)
    ]
    await OrderLines(db_pool).assign([PlaceRequest(r, "o1") for r in runs])
    await db_pool.execute(
        "INSERT INTO activity_runs (run_id, activity_id, workflow_id, trigger_kind, status)"
        " VALUES ($1::uuid, $2::uuid, $3, 'event', 'failed')",
        runs[0].run_id, aid, runs[0].workflow_id,
    )  # fmt: skip
    blocked = await order_store.turn(db_pool, runs[1].workflow_id)
    assert blocked is not None and blocked.blocker == runs[0].workflow_id

    # One of key and workflow_id, not both and not neither.
    both = {"key": "o1", "workflow_id": runs[0].workflow_id}
    for body in (both, {}):
        await ops_api.json("POST", f"/api/flow/{aid}/release", want=400, as_="ann", json=body)
    await ops_api.json("POST", "/api/flow/no-such/release", want=404, json={"key": "o1"})
    await ops_api.json("POST", f"/api/flow/{aid}/release", want=404, json={"key": "other"})

    act_name = await db_pool.fetchval("SELECT name FROM activities WHERE id = $1::uuid", aid)
    got = await ops_api.json(  # by the activity's name (or its id)
        "POST", f"/api/flow/{act_name}/release", as_="ann", json={"key": "o1"}
    )
    # The next run was never started in Temporal: not woken, it asks on its own.
    assert got == {
        "activity_id": aid,
        "released": runs[0].workflow_id,
        "run_status": "failed",
        "next_workflow_id": runs[1].workflow_id,
        "woken": False,
    }
    row = await db_pool.fetchrow(
        "SELECT outcome, released_by FROM flow_order_places WHERE workflow_id = $1",
        runs[0].workflow_id,
    )
    assert dict(row) == {"outcome": "released", "released_by": "ann"}
    turn = await order_store.turn(db_pool, runs[1].workflow_id)
    assert turn is not None and turn.place.turn
    # The run itself is untouched; releasing one run's place by its workflow id.
    assert await db_pool.fetchval(
        "SELECT status FROM activity_runs WHERE workflow_id = $1", runs[0].workflow_id
    ) == "failed"  # fmt: skip
    got = await ops_api.json(
        "POST", f"/api/flow/{aid}/release", as_="bob",
        json={"actor": "bob", "workflow_id": runs[2].workflow_id},
    )  # fmt: skip
    assert (got["released"], got["run_status"], got["next_workflow_id"]) == (
        runs[2].workflow_id, None, runs[1].workflow_id,
    )  # fmt: skip
