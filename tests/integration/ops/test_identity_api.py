"""Who acts comes from authentication, never from the request (issue 36 part 4, review
finding 7), on the real app, Temporal and PostgreSQL:

* a fix sent with carol's token is recorded as carol's in ``task_fixes``, and one whose
  body names alice is refused (403) with nothing recorded;
* an approval's decider is the token's person: bob posing as alice, and the shared
  token, are refused; alice's token decides, and ``approval_events`` says alice;
* behind an authenticating proxy (``INGEST_OPS_IDENTITY_HEADER`` from a pinned address)
  the header names the decider, and the same header from an unpinned address counts
  for nothing.
"""

from __future__ import annotations

import asyncio

import httpx
from pydantic import SecretStr

from ops.app import OpsDeps
from ops.service import OpsServer
from ops.settings import OpsSettings
from schemas.ids import task_workflow_id
from tests.support import wait
from workers.approvals.part import approval_part
from workers.parts import core_part

from .conftest import TOKEN, Api, charge_registry, event_run, insert_activity, start_run


async def test_a_fix_records_the_token_s_person_not_the_body(db_pool, worker, ops_api, paused_task):
    async with worker(registry=charge_registry()):
        p = await paused_task(amount="ten")
        path = f"/api/tasks/{p.task_id}/fix"
        posing = await ops_api.json(
            "POST", path, 403, as_="carol", json={"patch": {"amount": 10}, "actor": "alice"}
        )
        assert posing["field"] == "actor" and "'carol'" in posing["detail"]
        assert await db_pool.fetchval(
            "SELECT count(*) FROM task_fixes WHERE task_id = $1", p.task_id
        ) == 0  # fmt: skip
        assert (
            await db_pool.fetchval("SELECT status FROM task_instances WHERE id = $1", p.task_id)
            == "pending_fix"
        )
        await ops_api.json("POST", path, as_="carol", json={"patch": {"amount": 10}})
        result = await asyncio.wait_for(p.handle.result(), 60)
    assert result.status == "succeeded"
    actors = await db_pool.fetch("SELECT actor FROM task_fixes WHERE task_id = $1", p.task_id)
    assert [a["actor"] for a in actors] == ["carol"]


def approval(approvers: list[str]) -> dict[str, object]:
    return {"type": "approval", "payload": {"amount": 7},
            "config": {"approvers": approvers, "sla_seconds": 600}}  # fmt: skip


async def _waiting(api: Api, task_id: str) -> None:
    async def listed() -> bool:
        body = await api.json("GET", "/api/approvals", params={"status": "waiting"})
        return any(a["task_id"] == task_id for a in body["approvals"])

    await wait.eventually(listed, 60, "the approval to be listed as waiting")


async def _decider(db_pool, task_id: str) -> str | None:  # type: ignore[no-untyped-def]
    return await db_pool.fetchval(  # type: ignore[no-any-return]
        "SELECT actor FROM approval_events WHERE task_id = $1 AND kind = 'decision'", task_id
    )


async def test_a_decision_is_the_token_s_person(cfg, temporal, db_pool, topics, worker, ops_api):
    activity_id = await insert_activity(db_pool, [approval(["alice", "bob"])])
    run = event_run(activity_id)
    task_id = task_workflow_id(run.run_id, "approval", 0)
    path = f"/api/tasks/{task_id}/decision"
    async with worker(parts=(core_part, approval_part), emit_topic=topics.out):
        handle = await start_run(temporal, run, cfg.temporal.task_queue)
        await _waiting(ops_api, task_id)
        posing = await ops_api.json(
            "POST", path, 403, as_="bob", json={"by": "alice", "decision": "reject",
                                                "reason": "as alice"},
        )  # fmt: skip
        assert posing["field"] == "by"
        shared = await ops_api.json("POST", path, 403, json={"decision": "approve"})
        assert "shared INGEST_OPS_TOKEN" in shared["detail"]
        assert await _decider(db_pool, task_id) is None
        await ops_api.json("POST", path, as_="alice", json={"decision": "approve"})
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == "succeeded"
    assert await _decider(db_pool, task_id) == "alice"


async def test_behind_a_pinned_proxy_its_header_names_the_decider(
    cfg, temporal, db_pool, topics, worker, search_attributes
):
    activity_id = await insert_activity(db_pool, [approval(["erin"])])
    run = event_run(activity_id)
    task_id = task_workflow_id(run.run_id, "approval", 0)
    header = "X-Forwarded-User"
    pinned = OpsSettings(host="127.0.0.1", port=0, token=SecretStr(TOKEN),
                         identity_header=header, trusted_proxies="127.0.0.1")  # fmt: skip
    # The same header, but this server's proxy is elsewhere: the header is not believed.
    elsewhere = pinned.model_copy(update={"trusted_proxies": "10.255.255.1"})
    servers = [OpsServer(OpsDeps(temporal, db_pool, cfg, ops)) for ops in (pinned, elsewhere)]
    for server in servers:
        await server.start()
    shared = {"Authorization": f"Bearer {TOKEN}"}
    try:
        async with (
            worker(parts=(core_part, approval_part), emit_topic=topics.out),
            httpx.AsyncClient(base_url=servers[0].url, timeout=60) as proxied,
            httpx.AsyncClient(base_url=servers[1].url, timeout=60) as direct,
            httpx.AsyncClient(base_url=servers[0].url, headers=shared, timeout=60) as listing,
        ):
            handle = await start_run(temporal, run, cfg.temporal.task_queue)
            await _waiting(Api(servers[0].url, listing), task_id)
            body = {"decision": "approve"}
            path = f"/api/tasks/{task_id}/decision"
            ignored = await direct.post(path, json=body, headers={header: "erin"})
            assert ignored.status_code == 401, ignored.text
            me = await proxied.get("/api/whoami", headers={header: "erin"})
            assert me.json() == {"name": "erin", "kind": "proxy", "person": True}
            ok = await proxied.post(path, json=body, headers={header: "erin"})
            assert ok.status_code == 200, ok.text
            result = await asyncio.wait_for(handle.result(), 60)
    finally:
        for server in servers:
            await server.stop()
    assert result.status == "succeeded"
    assert await _decider(db_pool, task_id) == "erin"
