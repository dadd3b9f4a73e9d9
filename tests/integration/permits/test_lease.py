"""Lease expiry frees a slot; the expired holder's late release frees nothing, and
its fencing token is refused by ``ctx.permit.check()``."""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import REGISTRY
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus

from schemas.ids import permit_workflow_id
from tests.support.runs import event_run, insert_activity, registry_with, start_run
from tests.support.wait import eventually
from workers.handlers import TaskContext


async def test_lease_expiry_frees_slot_late_release_is_harmless_and_stale_token_rejected(
    cfg, temporal, db_pool, permit_worker
):
    from .conftest import declare

    resource = await declare(db_pool, capacity=1, lease=2)
    permit_id = permit_workflow_id(resource, "0")
    seen: dict[str, Any] = {}

    async def entered(role: str) -> bool:
        return role in seen

    async def task_status(task_id: str) -> str | None:
        return await db_pool.fetchval("SELECT status FROM task_instances WHERE id = $1", task_id)

    async def handler(ctx: TaskContext) -> None:
        assert ctx.permit is not None
        role = ctx.config["role"]
        now = asyncio.get_running_loop().time()
        seen[role] = {"task": ctx.task_id, "token": ctx.permit.token,
                      "run": ctx.permit.permit_run_id, "entered": now}  # fmt: skip
        if role == "a":
            # Hang past the lease, until the next holder is inside, then try to go on.
            await eventually(lambda: entered("b"), 30, 'lambda: entered("b")')
            seen["a"]["exited"] = asyncio.get_running_loop().time()
            await ctx.permit.check()  # the slot was acquired again: StalePermitError
        else:
            # Hold until the expired holder has finished (and sent its late release).
            async def a_done() -> bool:
                return await task_status(seen["a"]["task"]) == "failed"

            await eventually(a_done, 30, "a_done")
            desc = await temporal.get_workflow_handle(permit_id).describe()
            seen["b"]["after_late_release"] = (desc.status, desc.run_id)
            await ctx.permit.check()  # still the current holder

    def tasks(role: str, lease: int | None) -> list[dict[str, Any]]:
        permit = {"resource": resource, "lease_seconds": lease}
        return [{"type": "hold", "permit": permit, "config": {"role": role, "max_attempts": 1}}]

    # A takes the resource's 2 s lease; B overrides it with 30 s (it outlives A).
    run_a = event_run(await insert_activity(db_pool, tasks("a", None)))
    run_b = event_run(await insert_activity(db_pool, tasks("b", 30)))
    expired = "pipeline_permit_lease_expired_total"
    before = REGISTRY.get_sample_value(expired, {"resource": resource}) or 0.0

    async with permit_worker(registry_with(hold=handler)):
        handle_a = await start_run(temporal, run_a, cfg.temporal.task_queue)
        await eventually(lambda: entered("a"), 30, 'lambda: entered("a")')
        handle_b = await start_run(temporal, run_b, cfg.temporal.task_queue)
        result_a = await asyncio.wait_for(handle_a.result(), 60)
        result_b = await asyncio.wait_for(handle_b.result(), 60)

    a, b = seen["a"], seen["b"]
    # The lease freed the slot while A's handler still ran: B entered before A left.
    assert b["entered"] < a["exited"]
    assert b["token"] == a["token"] + 1 and b["run"] != a["run"]
    assert REGISTRY.get_sample_value(expired, {"resource": resource}) == before + 1
    # Fencing: A's check after the lease refused its stale token; the task failed for it.
    assert result_a.status == "failed"
    error = await db_pool.fetchval("SELECT last_error FROM task_instances WHERE id = $1",
                                   a["task"])  # fmt: skip
    assert "StalePermitError" in error and f"token {a['token']} is stale" in error
    # A's late release went to A's own (closed) permit run and failed; B kept the slot.
    assert b["after_late_release"] == (WorkflowExecutionStatus.RUNNING, b["run"])
    history = await temporal.get_workflow_handle(a["task"]).fetch_history()
    signals = [e for e in history.events if e.event_type
               == EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED]  # fmt: skip
    assert [s.signal_external_workflow_execution_initiated_event_attributes.workflow_execution
            .run_id for s in signals] == [a["run"]]  # fmt: skip
    assert any(e.event_type == EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED
               for e in history.events)  # fmt: skip
    assert result_b.status == "succeeded"
    row = await db_pool.fetchrow(
        "SELECT token, run_id, outcome FROM permit_slots WHERE resource = $1", resource
    )
    assert (row["token"], row["run_id"], row["outcome"]) == (b["token"], b["run"], "released")
