"""singleton ``mode: cancel`` on the stack (live router, a real worker): the new trigger
of a key cancels the running run through Temporal, and that run ends as a cancelled
run does (workers/lifecycle.py): its row ``cancelled`` with ``ended_by =
'singleton:<workflow id of the run that replaced it>'`` (the reason the router gives
Temporal, router/flow/singleton.py), its task cancelled (the handler got the
cancellation; the task row is not left running), the workflow *Canceled*, counted in
``pipeline_flow_runs_ended_total{cause="singleton"}``; the new run runs to its end.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from prometheus_client import REGISTRY
from temporalio.client import WorkflowExecutionStatus

from router.settings import RouterSettings
from schemas import ids
from tests.support import db, kafka
from tests.support.routing import route_until_committed
from tests.support.runs import registry_with
from tests.support.wait import eventually
from workers.handlers import TaskContext


async def _route(cfg: Any, temporal: Any, pool: Any, group: str, events: list[bytes]) -> Any:
    await kafka.produce(
        cfg.kafka.bootstrap_servers,
        cfg.kafka.events_topic,
        [(uuid.uuid4().hex.encode(), e, []) for e in events],
    )
    rcfg = RouterSettings(group=group, commit_interval_ms=100)
    return (await route_until_committed(cfg, rcfg, temporal, pool)).routing.stats


async def _true(v: bool) -> bool:
    return v


def _ended(aid: str, cause: str) -> float | None:
    return REGISTRY.get_sample_value(
        "pipeline_flow_runs_ended_total", {"activity": aid, "cause": cause}
    )


async def test_the_replaced_run_ends_cancelled_naming_the_run_that_replaced_it(
    cfg, temporal, db_pool, slot_worker
):
    tag = uuid.uuid4().hex[:8]
    etype, group = f"sgc.{tag}", f"sgc-{tag}"
    entered: list[str] = []
    cancelled: list[str] = []

    async def work(ctx: TaskContext) -> None:
        entered.append(ctx.run_id)
        if len(entered) > 1:
            return  # the replacing run finishes at once
        try:
            await asyncio.sleep(300)
        except asyncio.CancelledError:
            cancelled.append(ctx.run_id)
            raise

    aid = await db.seed_activity(
        db_pool,
        etype,
        flow={"singleton": {"key": "data.k", "mode": "cancel"}},
        tasks=[{"type": "work", "config": {"heartbeat_timeout_seconds": 2}}],
    )
    first, second = (ids.event_workflow_id(aid, f"e{i}-{tag}") for i in (1, 2))
    r1, r2 = (str(ids.run_id_for(w)) for w in (first, second))
    async with slot_worker(registry_with(work=work)):
        s = await _route(cfg, temporal, db_pool, group, [db.event(etype, f"e1-{tag}", k="a")])
        assert s.started == 1
        await eventually(lambda: _true(entered == [r1]), 30, "the first run's task to start")
        assert _ended(aid, "singleton") == 0  # the worker's refresh made its series
        s = await _route(cfg, temporal, db_pool, group, [db.event(etype, f"e2-{tag}", k="a")])
        assert (s.started, s.skipped) == (1, 0)

        async def closed() -> bool:
            for wid in (first, second):
                desc = await temporal.get_workflow_handle(wid).describe()
                if desc.status == WorkflowExecutionStatus.RUNNING:
                    return False
            return True

        await eventually(closed, 40, "both runs to close")
        desc = await temporal.get_workflow_handle(first).describe()
        assert desc.status == WorkflowExecutionStatus.CANCELED
        rows = {
            r["workflow_id"]: (r["status"], r["ended_by"])
            for r in await db_pool.fetch(
                "SELECT workflow_id, status, ended_by FROM activity_runs"
                " WHERE workflow_id = ANY($1::text[])",
                [first, second],
            )
        }
        assert rows == {
            first: ("cancelled", f"singleton:{second}"),
            second: ("succeeded", None),
        }
        tasks = await db_pool.fetch(
            "SELECT run_id::text AS run_id, status, last_error FROM task_instances"
            " WHERE run_id = ANY($1::uuid[]) ORDER BY status",
            [r1, r2],
        )
        assert [(t["run_id"], t["status"]) for t in tasks] == [
            (r1, "cancelled"),
            (r2, "succeeded"),
        ]
        # The task child is cancelled by its parent, which gives it no reason, and no
        # cancel request is recorded for a singleton (cancel_on's is; a timeout's child
        # is given it): the row names the run's ended_by if its end was written first.
        assert tasks[0]["last_error"] in (
            f"cancelled: singleton:{second}",
            "cancelled: cancellation requested",
        )
        await eventually(lambda: _true(cancelled == [r1]), 20, "the handler's cancellation")
        assert entered == [r1, r2]
        assert _ended(aid, "singleton") == 1
        # The key is the second run's no longer: its finish freed it.
        holder = await db_pool.fetchval(
            "SELECT workflow_id FROM flow_singleton WHERE activity_id = $1::uuid", aid
        )
        assert holder is None
