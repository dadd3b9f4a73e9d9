"""A cron activity through the real worker process code: apply -> schedule -> dispatcher -> run."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC

from app.parts import worker_parts
from definitions import store
from pipeline.runtime import Shutdown
from scheduler import sync
from schemas import ids
from schemas.definitions import ActivityDef
from tests.support import wait
from workers.settings import WorkerSettings
from workers.worker import run_worker


async def test_schedule_fires_through_the_production_worker(cfg, temporal, db_pool):
    act = ActivityDef.model_validate(
        {
            "id": str(uuid.uuid4()),
            "name": "e2e cron",
            "trigger": {
                "type": "cron",
                "cron": "* * * * *",
                "interval_seconds": 5,
                "misfire_policy": "skip",
            },
            "tasks": [{"type": "noop"}],
        }
    )
    await store.upsert(db_pool, [act])
    changes = await sync.reconcile(temporal, db_pool, cfg.temporal.task_queue)
    assert changes, "the first sync must create the schedule"
    try:
        shutdown = Shutdown()
        worker = asyncio.create_task(
            run_worker(
                cfg,
                shutdown,
                client=temporal,
                pool=db_pool,
                worker_settings=WorkerSettings(),
                parts=worker_parts(),
            )
        )

        async def ran() -> bool:
            return bool(
                await db_pool.fetchval(
                    "SELECT count(*) FROM activity_runs"
                    " WHERE activity_id = $1 AND status = 'succeeded'",
                    act.id,
                )
            )

        try:
            await wait.eventually(ran, 60, "a scheduled run to finish")
        finally:
            shutdown.trigger()
            assert await asyncio.wait_for(worker, 60) == 0
        row = await db_pool.fetchrow(
            "SELECT workflow_id, trigger_kind, scheduled_for FROM activity_runs"
            " WHERE activity_id = $1 ORDER BY scheduled_for LIMIT 1",
            act.id,
        )
        assert row["trigger_kind"] == "cron"
        nominal = row["scheduled_for"].astimezone(UTC)
        assert nominal.microsecond == 0 and nominal.second % 5 == 0  # a nominal time, not a clock
        assert row["workflow_id"] == ids.cron_workflow_id(act.id, nominal)
        assert row["workflow_id"].endswith("+00:00")
    finally:
        await temporal.get_schedule_handle(ids.schedule_id(act.id)).delete()
