"""flow.timeouts on the stack: a run still in its throttle delay past ``start`` ends
``timed_out`` (``timeout:start``) without running a task; a run whose task outlives
``finish`` ends ``timed_out`` (``timeout:finish``), its task cancelled. The clock is the
run's creation (the start request), before the delay: a delayed run's deadline is not
pushed back by its delay.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

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


async def _row(pool: Any, wid: str) -> dict[str, Any] | None:
    row = await pool.fetchrow(
        "SELECT status, ended_by FROM activity_runs WHERE workflow_id = $1", wid
    )
    return dict(row) if row is not None else None


async def _closed(temporal: Any, wid: str) -> bool:
    desc = await temporal.get_workflow_handle(wid).describe()
    return desc.status != WorkflowExecutionStatus.RUNNING


async def test_a_run_delayed_past_its_start_timeout_times_out_before_any_task(
    cfg, temporal, db_pool, slot_worker
):
    tag = uuid.uuid4().hex[:8]
    etype, group = f"ts.{tag}", f"ts-{tag}"
    # 8 s: room for e1's first task to start on a loaded machine (it must not time out;
    # 4 s was not, with a CI run and three test sessions on two cores).
    flow = {"throttle": {"limit": 1, "period": "20s"}, "timeouts": {"start": "8s"}}
    ran: list[str] = []

    async def visit(ctx: TaskContext) -> None:
        ran.append(ctx.run_id)

    aid = await db.seed_activity(db_pool, etype, flow=flow, tasks=[{"type": "visit"}])
    w1, w2 = (ids.event_workflow_id(aid, f"{e}-{tag}") for e in ("e1", "e2"))
    async with slot_worker(registry_with(visit=visit)):
        s = await _route(
            cfg, temporal, db_pool, group,
            [db.event(etype, f"e1-{tag}"), db.event(etype, f"e2-{tag}")],
        )  # fmt: skip
        assert s.started == 2
        for wid in (w1, w2):
            await eventually(lambda wid=wid: _closed(temporal, wid), 60, wid)  # type: ignore[misc]
        # e1 and e2 are decided concurrently: either takes the slot and runs at once, the
        # other starts with a 20 s delay, past its 8 s start deadline when it first runs.
        rows = {wid: await _row(db_pool, wid) for wid in (w1, w2)}
        (first,) = [w for w, r in rows.items() if r == {"status": "succeeded", "ended_by": None}]
        (late,) = [w for w in rows if w != first]
        assert rows[late] == {"status": "timed_out", "ended_by": "timeout:start"}
        result = await temporal.get_workflow_handle(late).result()
        assert result["status"] == "timed_out"
        assert ran == [str(ids.run_id_for(first))]


async def test_a_run_past_its_finish_timeout_has_its_task_cancelled(
    cfg, temporal, db_pool, slot_worker
):
    tag = uuid.uuid4().hex[:8]
    etype, group = f"tf.{tag}", f"tf-{tag}"
    seen: list[str] = []

    async def block(ctx: TaskContext) -> None:
        try:
            await asyncio.sleep(300)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    aid = await db.seed_activity(
        db_pool,
        etype,
        flow={"timeouts": {"finish": "3s"}},
        tasks=[{"type": "block", "config": {"heartbeat_timeout_seconds": 2}}],
    )
    wid = ids.event_workflow_id(aid, f"e1-{tag}")
    async with slot_worker(registry_with(block=block)):
        assert (await _route(cfg, temporal, db_pool, group, [db.event(etype, f"e1-{tag}")])).started
        await eventually(lambda: _closed(temporal, wid), 40, "the run to time out")
        desc = await temporal.get_workflow_handle(wid).describe()
        assert desc.status == WorkflowExecutionStatus.COMPLETED
        assert await _row(db_pool, wid) == {"status": "timed_out", "ended_by": "timeout:finish"}
        tasks = await db_pool.fetch(
            "SELECT status, last_error FROM task_instances WHERE run_id = $1::uuid",
            str(ids.run_id_for(wid)),
        )
        assert [r["status"] for r in tasks] == ["cancelled"]
        assert "timeout:finish" in tasks[0]["last_error"]
        await eventually(lambda: _true(seen == ["cancelled"]), 20, "the handler's cancellation")


async def _true(v: bool) -> bool:
    return v
