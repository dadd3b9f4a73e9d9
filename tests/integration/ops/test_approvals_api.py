"""The approvals endpoints of the ops API, on the real FastAPI app, Temporal and PostgreSQL.

GET /api/approvals lists what waits (and for whom), POST /api/tasks/{id}/decision
carries a decision to the task's ``decide`` update, and the validator's refusals come
back as 400 (naming the field), 403, 404 and 409.
"""

from __future__ import annotations

import asyncio

import httpx

from schemas.ids import task_workflow_id
from tests.support import wait
from workers.approvals.part import approval_part
from workers.parts import core_part

from .conftest import Api, event_run, insert_activity, start_run

APPROVAL = {
    "type": "approval",
    "payload": {"amount": 5000},
    "config": {"approvers": ["alice", "bob"], "sla_seconds": 600, "escalate_to": "carol"},
}


async def listed(api: Api, **params: str) -> list[str]:
    body = await api.json("GET", "/api/approvals", params=params)
    return [a["task_id"] for a in body["approvals"]]


async def test_list_and_decide_through_the_api(cfg, temporal, db_pool, topics, worker, ops_api):
    activity_id = await insert_activity(db_pool, [APPROVAL, {"type": "noop"}])
    run = event_run(activity_id)
    task_id = task_workflow_id(run.run_id, "approval", 0)
    async with worker(parts=(core_part, approval_part), emit_topic=topics.out):
        handle = await start_run(temporal, run, cfg.temporal.task_queue)

        async def waiting() -> bool:
            return task_id in await listed(ops_api, status="waiting")

        await wait.eventually(waiting, 60, "the approval to be listed as waiting")
        (row,) = [
            a
            for a in (await ops_api.json("GET", "/api/approvals"))["approvals"]
            if a["task_id"] == task_id
        ]
        assert (row["status"], row["approvers"], row["escalate_to"]) == (
            "waiting", ["alice", "bob"], ["carol"]
        )  # fmt: skip
        assert row["deadline"] > row["requested_at"] and row["payload"]["amount"] == 5000
        # ``approver``: what that person may decide now (carol only once escalated).
        assert task_id in await listed(ops_api, approver="bob")
        assert task_id not in await listed(ops_api, approver="carol")
        bad = await ops_api.json("GET", "/api/approvals", 400, params={"status": "bogus"})
        assert bad["field"] == "status"
        state = (await ops_api.json("GET", f"/api/approvals/{task_id}"))["approval"]
        assert [e["kind"] for e in state["audit"]] == ["requested"]

        path = f"/api/tasks/{task_id}/decision"
        refused = await ops_api.json("POST", path, 403, as_="mallory", json={"decision": "approve"})
        assert "'mallory' may not decide" in refused["detail"] and refused["field"] == "by"
        shared = await ops_api.json("POST", path, 403, json={"decision": "approve"})
        assert "shared INGEST_OPS_TOKEN" in shared["detail"] and shared["field"] == "by"
        # A body naming someone else than the token: 403, not a decision as them.
        posing = await ops_api.json(
            "POST", path, 403, as_="mallory", json={"by": "alice", "decision": "approve"}
        )
        assert "'mallory'" in posing["detail"] and posing["field"] == "by"
        no_reason = await ops_api.json("POST", path, 400, as_="bob", json={"decision": "reject"})
        assert no_reason["field"] == "reason"
        bad_verb = await ops_api.json("POST", path, 400, as_="bob", json={"decision": "maybe"})
        assert bad_verb["field"] == "decision"
        unknown = "task-00000000-0000-5000-8000-000000000000:approval:0"
        await ops_api.json("POST", f"/api/tasks/{unknown}/decision", 404, as_="bob",
                           json={"decision": "approve"})  # fmt: skip

        ok = await ops_api.json("POST", path, as_="alice", json={"decision": "approve"})
        assert (ok["task_id"], ok["status"], ok["seq"]) == (task_id, "approved", 1)
        result = await asyncio.wait_for(handle.result(), 60)
        again = await ops_api.json("POST", path, 409, as_="bob",
                                   json={"decision": "reject", "reason": "late"})  # fmt: skip
        assert "closed" in again["detail"]

    assert (result.status, result.tasks_succeeded) == ("succeeded", 2)
    assert task_id not in await listed(ops_api, status="waiting")
    assert task_id in await listed(ops_api, status="closed")
    decision = await db_pool.fetchrow(
        "SELECT actor, decision FROM approval_events WHERE task_id = $1 AND kind = 'decision'",
        task_id,
    )
    assert tuple(decision) == ("alice", "approve")


async def test_approvals_need_the_token(ops_api):
    async with httpx.AsyncClient(base_url=ops_api.url) as anonymous:
        assert (await anonymous.get("/api/approvals")).status_code == 401
        resp = await anonymous.post(
            "/api/tasks/x/decision",
            json={"by": "alice", "decision": "approve"},
            headers={"Authorization": "Bearer wrong"},
        )
        assert resp.status_code == 403
