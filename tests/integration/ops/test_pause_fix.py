"""Pause-and-fix through the ops API, on the real Temporal, PostgreSQL and Kafka.

A ``charge`` task with ``on_failure: pause`` fails on bad data, pauses as
pending_fix (found through visibility), and an operator fixes, skips or aborts it.
"""

from __future__ import annotations

import asyncio

import orjson
import pytest
from prometheus_client import REGISTRY
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from schemas import search_attributes as sa
from schemas.workflow_io import FixRequest, FixState

from .conftest import Api, charge_registry


async def history_length(temporal: Client, workflow_id: str) -> int:
    return len((await temporal.get_workflow_handle(workflow_id).fetch_history()).events)


def fixes_counter(action: str) -> float:
    value = REGISTRY.get_sample_value("pipeline_task_fixes_total", {"action": action})
    return value or 0.0  # a counter never incremented in this process has no sample yet


async def activity_tasks_scheduled(temporal: Client, workflow_id: str) -> int:
    history = await temporal.get_workflow_handle(workflow_id).fetch_history()
    return sum(e.HasField("activity_task_scheduled_event_attributes") for e in history.events)


# A short handler runs as a local activity (TaskSpec.local): its failure must pause
# the task and its fix retry it exactly as for a regular activity.
@pytest.mark.parametrize("short", [False, True], ids=["activity", "local_activity"])
async def test_fix_patch_retries_the_task_and_the_run_succeeds(
    temporal, db_pool, worker, ops_api: Api, paused_task, short: bool
):
    fixes_before = fixes_counter("fix")
    async with worker(registry=charge_registry(short)):
        p = await paused_task(amount="ten")
        listed = await ops_api.json("GET", "/api/tasks", params={"activity": p.activity_id})
        (task,) = listed["tasks"]
        assert (task["task_id"], task["status"], task["task_type"]) == (
            p.task_id,
            "pending_fix",
            "charge",
        )
        assert "amount must be a non-negative number, got 'ten'" in task["last_error"]
        assert task["payload"]["amount"] == "ten"
        desc = await temporal.get_workflow_handle(p.task_id).describe()
        attrs = desc.typed_search_attributes
        assert (attrs.get(sa.STATUS), attrs.get(sa.FAILED_TASK), attrs.get(sa.ACTIVITY_ID)) == (
            "PENDING_FIX",
            "charge",
            p.activity_id,
        )
        by_type = await ops_api.json(
            "GET", "/api/tasks", params={"failed_task": "charge", "activity": p.activity_id}
        )
        assert [t["task_id"] for t in by_type["tasks"]] == [p.task_id]
        other = await ops_api.json(
            "GET", "/api/tasks", params={"failed_task": "emit", "activity": p.activity_id}
        )
        assert other["tasks"] == []

        answer = await ops_api.json(
            "POST",
            f"/api/tasks/{p.task_id}/fix",
            as_="alice",
            json={"patch": {"amount": 10}, "actor": "alice", "note": "typo in the source system"},
        )
        assert answer == {"task_id": p.task_id, "action": "fix", "seq": 1}
        result = await asyncio.wait_for(p.handle.result(), 60)
        state = await temporal.get_workflow_handle(p.task_id).query(
            "fix_state", result_type=FixState
        )

    assert (result.status, result.tasks_succeeded, result.tasks_failed) == ("succeeded", 1, 0)
    row = await db_pool.fetchrow("SELECT * FROM task_instances WHERE id = $1", p.task_id)
    assert (row["status"], row["last_error"]) == ("succeeded", None)
    assert orjson.loads(row["payload"])["amount"] == 10
    (fix,) = await db_pool.fetch("SELECT * FROM task_fixes WHERE task_id = $1", p.task_id)
    assert (fix["seq"], fix["action"], fix["actor"], fix["note"]) == (
        1,
        "fix",
        "alice",
        "typo in the source system",
    )
    assert orjson.loads(fix["patch"]) == {"amount": 10}
    assert "got 'ten'" in fix["error"]
    assert (state.status, [(f.action, f.actor, f.patch) for f in state.fixes]) == (
        "succeeded",
        [("fix", "alice", {"amount": 10})],
    )
    assert state.payload["amount"] == 10
    assert fixes_counter("fix") == fixes_before + 1
    # Both attempts ran as the kind of activity the handler asked for.
    assert await activity_tasks_scheduled(temporal, p.task_id) == (0 if short else 2)

    detail = await ops_api.json("GET", f"/api/runs/{p.run_id}")
    assert (detail["run"]["status"], detail["temporal_status"]) == ("succeeded", "COMPLETED")
    assert [t["status"] for t in detail["tasks"]] == ["succeeded"]
    assert [f["action"] for f in detail["fixes"]] == ["fix"]
    # Not pending_fix any more: 409.
    again = await ops_api.http.post(f"/api/tasks/{p.task_id}/fix", json={"patch": {"amount": 1}})
    assert again.status_code == 409 and "not pending_fix" in again.json()["detail"]


async def test_skip_marks_the_task_skipped_and_the_run_goes_on(
    db_pool, worker, ops_api, paused_task
):
    async with worker(registry=charge_registry()):
        p = await paused_task(amount=-5, extra_tasks=[{"type": "noop"}])
        await ops_api.json("POST", f"/api/tasks/{p.task_id}/skip", as_="carol", json={})
        result = await asyncio.wait_for(p.handle.result(), 60)
    assert (
        result.status,
        result.tasks_total,
        result.tasks_succeeded,
        result.tasks_skipped,
        result.tasks_failed,
        result.tasks_duplicate,
    ) == ("succeeded", 2, 1, 1, 0, 0)
    row = await db_pool.fetchrow("SELECT * FROM task_instances WHERE id = $1", p.task_id)
    assert row["status"] == "skipped" and "got -5" in row["last_error"]
    run = await db_pool.fetchrow(
        "SELECT status FROM activity_runs WHERE run_id = $1::uuid", p.run_id
    )
    assert run["status"] == "succeeded"
    actions = await db_pool.fetch(
        "SELECT action, actor, patch FROM task_fixes WHERE task_id = $1", p.task_id
    )
    assert [tuple(a) for a in actions] == [("skip", "carol", None)]


async def test_abort_fails_the_task_and_the_run(db_pool, worker, ops_api, paused_task):
    async with worker(registry=charge_registry()):
        p = await paused_task(amount=None)
        await ops_api.json("POST", f"/api/tasks/{p.task_id}/abort", as_="dave", json={})
        result = await asyncio.wait_for(p.handle.result(), 60)
    assert (result.status, result.tasks_failed) == ("failed", 1)
    row = await db_pool.fetchrow("SELECT * FROM task_instances WHERE id = $1", p.task_id)
    assert row["status"] == "failed"
    assert row["last_error"].startswith("TaskAborted: aborted by dave: ")
    run = await db_pool.fetchrow(
        "SELECT status FROM activity_runs WHERE run_id = $1::uuid", p.run_id
    )
    assert run["status"] == "failed"


@pytest.mark.parametrize(
    ("patch", "says"),
    [
        ([1, 2], "patch must be a JSON object"),
        ({}, "patch is empty"),
        ({"trigger": {"run_id": "x"}}, "patch.trigger: the trigger context cannot be patched"),
        ({"amount": "ten"}, "patch changes nothing"),
    ],
)
async def test_an_invalid_patch_is_refused_and_writes_no_history(
    temporal, worker, ops_api, paused_task, patch, says
):
    async with worker(registry=charge_registry()):
        p = await paused_task(amount="ten")
        before = await history_length(temporal, p.task_id)
        resp = await ops_api.http.post(f"/api/tasks/{p.task_id}/fix", json={"patch": patch})
        assert resp.status_code == 400, resp.text
        assert resp.json()["field"] == "patch" and says in resp.json()["detail"]
        assert await history_length(temporal, p.task_id) == before
        # Still paused: a valid fix is accepted afterwards.
        await ops_api.json("POST", f"/api/tasks/{p.task_id}/fix", json={"patch": {"amount": 1}})
        assert (await asyncio.wait_for(p.handle.result(), 60)).status == "succeeded"


async def test_a_second_fix_while_the_retry_runs_is_refused(temporal, worker, ops_api, paused_task):
    async with worker(registry=charge_registry()):
        p = await paused_task(amount="ten")
        await ops_api.json(
            "POST", f"/api/tasks/{p.task_id}/fix", json={"patch": {"amount": 3, "delay_seconds": 4}}
        )
        handle = temporal.get_workflow_handle(p.task_id)
        before = await history_length(temporal, p.task_id)
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update("fix", FixRequest("eve", {"amount": 4}))
        cause = refused.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == "NotPendingFix"
        assert await history_length(temporal, p.task_id) == before
        through_api = await ops_api.http.post(
            f"/api/tasks/{p.task_id}/fix", json={"patch": {"amount": 4}}
        )
        assert through_api.status_code == 409
        assert (await asyncio.wait_for(p.handle.result(), 60)).status == "succeeded"
        state = await handle.query("fix_state", result_type=FixState)
    assert (state.payload["amount"], len(state.fixes)) == (3, 1)


async def test_errors_name_the_field_the_id_or_the_state(ops_api: Api, db_pool):
    missing = await ops_api.http.post("/api/tasks/task-nope:charge:0/skip", json={})
    assert missing.status_code == 404 and "task-nope:charge:0" in missing.json()["detail"]
    bad_run = await ops_api.http.get("/api/runs/not-a-uuid")
    assert bad_run.status_code == 400 and bad_run.json()["field"] == "run_id"
    unknown_run = await ops_api.http.get("/api/runs/00000000-0000-0000-0000-000000000000")
    assert unknown_run.status_code == 404
    bad_since = await ops_api.http.get("/api/runs", params={"since": "yesterday"})
    assert bad_since.status_code == 400 and bad_since.json()["field"] == "since"
    bad_status = await ops_api.http.get("/api/tasks", params={"status": "paused"})
    assert bad_status.status_code == 400 and bad_status.json()["field"] == "status"
    bad_replay = await ops_api.http.post("/api/replay", json={})
    assert bad_replay.status_code == 400 and bad_replay.json()["field"] == "from_offset"
    no_patch = await ops_api.http.post("/api/tasks/task-x:charge:0/fix", json={})
    assert no_patch.status_code == 400 and no_patch.json()["field"] == "patch"


async def test_pending_fix_is_listed_in_the_pending_gauge_until_fixed(
    db_pool, worker, ops_api, paused_task
):
    from ops import gauges

    async with worker(registry=charge_registry()):
        p = await paused_task(amount="ten")
        assert await gauges.refresh(db_pool) == 1
        labels = {"activity": p.activity_id, "task_type": "charge"}
        assert REGISTRY.get_sample_value("pipeline_tasks_pending_fix", labels) == 1
        oldest = REGISTRY.get_sample_value("pipeline_task_pending_fix_oldest_seconds", labels)
        assert oldest is not None and oldest >= 0
        await ops_api.json("POST", f"/api/tasks/{p.task_id}/fix", json={"patch": {"amount": 1}})
        await asyncio.wait_for(p.handle.result(), 60)
    assert await gauges.refresh(db_pool) == 0
    assert REGISTRY.get_sample_value("pipeline_tasks_pending_fix", labels) is None
