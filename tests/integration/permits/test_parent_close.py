"""A holder that closes frees its slot at once (ParentClosePolicy.TERMINATE), long
before its lease; a holder that fails releases on the way out."""

from __future__ import annotations

import asyncio

from temporalio.client import WorkflowExecutionStatus

from schemas.ids import permit_workflow_id
from tests.support.runs import event_run, insert_activity, registry_with, start_run
from tests.support.wait import eventually
from workers.handlers import PermanentTaskError, TaskContext

from .conftest import declare


async def test_terminated_or_failed_holder_frees_its_slot_at_once(
    cfg, temporal, db_pool, permit_worker
):
    resource = await declare(db_pool, capacity=1, lease=600)
    inside: list[str] = []

    async def handler(ctx: TaskContext) -> None:
        inside.append(ctx.config["role"])
        if ctx.config["role"] == "hang":
            await asyncio.Event().wait()  # until its workflow is terminated
        if ctx.config["role"] == "fail":
            raise PermanentTaskError("failing while holding the permit")

    def activity(role: str) -> list[dict[str, object]]:
        config = {"role": role, "max_attempts": 1, "heartbeat_timeout_seconds": 1}
        return [{"type": "use", "permit": {"resource": resource}, "config": config}]

    runs = {role: event_run(await insert_activity(db_pool, activity(role)))
            for role in ("hang", "fail", "ok")}  # fmt: skip

    async def slot_row() -> tuple[int, str | None]:
        row = await db_pool.fetchrow(
            "SELECT token, outcome FROM permit_slots WHERE resource = $1", resource
        )
        return (row["token"], row["outcome"]) if row else (0, None)

    async with permit_worker(registry_with(use=handler)):
        q = cfg.temporal.task_queue
        hang = await start_run(temporal, runs["hang"], q)
        await eventually(
            lambda: asyncio.sleep(0, inside == ["hang"]),
            30,
            'lambda: asyncio.sleep(0, inside == ["hang"])',
        )
        first_run = (await temporal.get_workflow_handle(permit_workflow_id(resource, "0"))
                     .describe()).run_id  # fmt: skip
        fail = await start_run(temporal, runs["fail"], q)
        # Terminate the holding task: its permit child is terminated with it.
        task_id = await db_pool.fetchval(
            "SELECT id FROM task_instances WHERE run_id = $1::uuid", runs["hang"].run_id
        )
        await temporal.get_workflow_handle(task_id).terminate("test: holder dies")
        assert (await asyncio.wait_for(fail.result(), 60)).status == "failed"
        ok = await start_run(temporal, runs["ok"], q)
        assert (await asyncio.wait_for(ok.result(), 60)).status == "succeeded"
        # The run whose task was terminated records that task as failed.
        assert (await asyncio.wait_for(hang.result(), 60)).tasks_failed == 1

    # All three held the slot in turn, within a 600 s lease: nothing waited for expiry.
    assert inside == ["hang", "fail", "ok"]
    first = await temporal.get_workflow_handle(permit_workflow_id(resource, "0"),
                                               run_id=first_run).describe()  # fmt: skip
    assert first.status == WorkflowExecutionStatus.TERMINATED
    assert await slot_row() == (3, "released")
    ages = await db_pool.fetchval(
        "SELECT extract(epoch FROM now() - min(created_at)) FROM task_instances"
    )
    assert ages < 600  # the whole sequence ran well inside one lease
