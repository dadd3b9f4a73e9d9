"""flow.timeouts on a cron activity (the stack, a real worker): a cron run, started as
the cron dispatcher starts it (``RunActivityInput.for_cron``, the contract id), is timed
from its start request like an event run; past ``finish`` its task is cancelled and it
ends ``timed_out`` (``timeout:finish``), counted ``cause="timeout_finish"``.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

from prometheus_client import REGISTRY
from temporalio.client import WorkflowExecutionStatus

from schemas.workflow_io import RunActivityInput
from tests.support import db
from tests.support.runs import registry_with, start_run
from tests.support.wait import eventually
from workers.handlers import TaskContext


async def _true(v: bool) -> bool:
    return v


async def test_a_cron_run_past_its_finish_timeout_ends_timed_out(
    cfg, temporal, db_pool, slot_worker
):
    seen: list[str] = []

    async def block(ctx: TaskContext) -> None:
        seen.append("entered")
        try:
            await asyncio.sleep(300)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    aid = await db.seed_activity(
        db_pool,
        trigger={"type": "cron", "cron": "0 3 * * *"},
        flow={"timeouts": {"finish": "3s"}},
        tasks=[{"type": "block", "config": {"heartbeat_timeout_seconds": 2}}],
    )
    nominal = datetime(2030, 1, 1, 3, tzinfo=UTC) + timedelta(minutes=uuid.uuid4().int % 1000)
    run = RunActivityInput.for_cron(aid, nominal - timedelta(days=1), nominal)
    async with slot_worker(registry_with(block=block)):
        handle = await start_run(temporal, run, cfg.temporal.task_queue)
        result = await asyncio.wait_for(handle.result(), 60)
        assert result.status == "timed_out"
        desc = await handle.describe()
        assert desc.status == WorkflowExecutionStatus.COMPLETED
        row = await db_pool.fetchrow(
            "SELECT trigger_kind, status, ended_by FROM activity_runs WHERE workflow_id = $1",
            run.workflow_id,
        )
        assert dict(row) == {
            "trigger_kind": "cron",
            "status": "timed_out",
            "ended_by": "timeout:finish",
        }
        tasks = await db_pool.fetch(
            "SELECT status FROM task_instances WHERE run_id = $1::uuid", run.run_id
        )
        assert [t["status"] for t in tasks] == ["cancelled"]
        await eventually(lambda: _true(seen == ["entered", "cancelled"]), 20, "the cancel")
        labels = {"activity": aid, "cause": "timeout_finish"}
        assert REGISTRY.get_sample_value("pipeline_flow_runs_ended_total", labels) == 1
