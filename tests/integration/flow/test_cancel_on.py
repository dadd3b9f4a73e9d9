"""flow.cancel_on on the stack: the live router, a real worker, Temporal and PostgreSQL.

A cancelling event cancels the runs of its key that have not finished, wherever they
are: a task in progress (the handler gets the cancellation), a throttle delay (the run
never ran: its row is written cancelled), a concurrency queue (it leaves the queue). A
replayed cancelling event cancels nothing decided after it; a redelivered trigger of a
cancelled run does not run again.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from temporalio.client import WorkflowExecutionStatus
from temporalio.exceptions import WorkflowAlreadyStartedError

from router.settings import RouterSettings
from schemas import ids
from schemas.workflow_io import RunActivityInput
from tests.support import db, kafka
from tests.support.routing import route_until_committed
from tests.support.runs import registry_with, start_run
from tests.support.wait import eventually
from workers.handlers import TaskContext


class Blocker:
    """A handler that stays inside until cancelled; records who entered and who saw
    the cancellation (in-process: the worker runs in this test)."""

    def __init__(self) -> None:
        self.entered: list[str] = []
        self.cancelled: list[str] = []

    def handler(self) -> Any:
        async def block(ctx: TaskContext) -> None:
            self.entered.append(ctx.run_id)
            try:
                await asyncio.sleep(300)
            except asyncio.CancelledError:
                self.cancelled.append(ctx.run_id)
                raise

        return block


async def _route(cfg: Any, temporal: Any, pool: Any, group: str, events: list[bytes]) -> Any:
    await kafka.produce(
        cfg.kafka.bootstrap_servers,
        cfg.kafka.events_topic,
        [(uuid.uuid4().hex.encode(), e, []) for e in events],
    )
    rcfg = RouterSettings(group=group, commit_interval_ms=100)
    return (await route_until_committed(cfg, rcfg, temporal, pool)).routing.stats


async def _run(pool: Any, wid: str) -> dict[str, Any] | None:
    row = await pool.fetchrow(
        "SELECT status, ended_by FROM activity_runs WHERE workflow_id = $1", wid
    )
    return dict(row) if row is not None else None


async def _status(temporal: Any, wid: str) -> WorkflowExecutionStatus | None:
    return (await temporal.get_workflow_handle(wid).describe()).status


def _activity(tag: str, flow: dict[str, Any]) -> dict[str, Any]:
    return {
        "cancel_on": [{"event_type": f"cx.{tag}", "match": {"data.order": "data.order"}}],
        **flow,
    }


_BLOCK = [{"type": "block", "config": {"heartbeat_timeout_seconds": 2}}]


async def test_a_cancel_event_cancels_a_running_task_and_a_delayed_run(
    cfg, temporal, db_pool, slot_worker
):
    tag = uuid.uuid4().hex[:8]
    etype, group = f"co.{tag}", f"co-{tag}"
    flow = _activity(tag, {"throttle": {"limit": 1, "period": "60s", "key": "data.order"}})
    aid = await db.seed_activity(db_pool, etype, flow=flow, tasks=_BLOCK)
    wid = {e: ids.event_workflow_id(aid, f"{e}-{tag}") for e in ("e1", "e2", "e3", "e4")}
    blocker = Blocker()
    async with slot_worker(registry_with(block=blocker.handler())):
        s = await _route(
            cfg, temporal, db_pool, group,
            [db.event(etype, f"e1-{tag}", order="o1"), db.event(etype, f"e2-{tag}", order="o1"),
             db.event(etype, f"e3-{tag}", order="o2")],
        )  # fmt: skip
        assert s.started == 3
        # e1 and e2 are decided concurrently: either takes o1's slot, the other waits.
        o1 = {str(ids.run_id_for(wid[e])): e for e in ("e1", "e2")}
        await eventually(lambda: _true(bool(o1.keys() & set(blocker.entered))), 30, "o1's task")
        run1 = next(r for r in blocker.entered if r in o1)
        waiting = wid["e2" if o1[run1] == "e1" else "e1"]
        # The other waits in its throttle delay (60 s); o1's cancel reaches both.
        s = await _route(
            cfg, temporal, db_pool, group, [db.event(f"cx.{tag}", f"c1-{tag}", order="o1")]
        )
        assert s.cancelled == 2 and s.dlq == 0
        for e in ("e1", "e2"):
            await eventually(
                lambda e=e: _is(temporal, wid[e], WorkflowExecutionStatus.CANCELED),  # type: ignore[misc]
                30,
                e,
            )
            assert await _run(db_pool, wid[e]) == {
                "status": "cancelled",
                "ended_by": f"cancel_on:c1-{tag}",
            }
        # The handler sees Temporal's cancellation at its next heartbeat (TRY_CANCEL: the
        # task child does not wait for it).
        await eventually(lambda: _true(run1 in blocker.cancelled), 20, "the handler's cancel")
        task_rows = await db_pool.fetch(
            "SELECT status, last_error FROM task_instances WHERE run_id = $1::uuid", run1
        )
        assert [r["status"] for r in task_rows] == ["cancelled"]
        # Its parent gives the child no reason: the step names the router's request.
        assert task_rows[0]["last_error"] == f"cancelled: cancel_on:c1-{tag}"
        assert str(ids.run_id_for(waiting)) not in blocker.entered  # never ran
        assert await _status(temporal, wid["e3"]) == WorkflowExecutionStatus.RUNNING

        # A run of o1 decided after the cancel, then the cancel event again (a replay):
        # it cancels nothing that started after it.
        s = await _route(cfg, temporal, db_pool, group, [db.event(etype, f"e4-{tag}", order="o1")])
        assert s.started == 1
        s = await _route(
            cfg, temporal, db_pool, group, [db.event(f"cx.{tag}", f"c1-{tag}", order="o1")]
        )
        assert s.cancelled == 0
        await asyncio.sleep(1)
        assert await _status(temporal, wid["e4"]) == WorkflowExecutionStatus.RUNNING
        assert (await _run(db_pool, wid["e4"]) or {}).get("status") in (None, "running")

        # The cancelled run's trigger again: the ledger and REJECT_DUPLICATE stop it.
        ran = o1[run1]  # the run that had a task in progress
        s = await _route(
            cfg, temporal, db_pool, group, [db.event(etype, f"{ran}-{tag}", order="o1")]
        )
        assert (s.started, s.ledger_duplicates) == (0, 1)
        try:
            await start_run(
                temporal,
                RunActivityInput.for_event(aid, f"{ran}-{tag}", {"data": {"order": "o1"}}),
                cfg.temporal.task_queue,
            )
            raise AssertionError("a cancelled run's id was started again")
        except WorkflowAlreadyStartedError:
            pass
        assert blocker.entered.count(run1) == 1

        # Leave nothing running: o2 and e4 are cancelled by their own events.
        s = await _route(
            cfg, temporal, db_pool, group,
            [db.event(f"cx.{tag}", f"c2-{tag}", order="o2"),
             db.event(f"cx.{tag}", f"c3-{tag}", order="o1")],
        )  # fmt: skip
        assert s.cancelled == 2
        for e in ("e3", "e4"):
            await eventually(
                lambda e=e: _is(temporal, wid[e], WorkflowExecutionStatus.CANCELED),  # type: ignore[misc]
                30,
                e,
            )


async def test_a_cancel_event_takes_a_queued_run_out_of_its_concurrency_queue(
    cfg, temporal, db_pool, slot_worker
):
    tag = uuid.uuid4().hex[:8]
    etype, group = f"cq.{tag}", f"cq-{tag}"
    flow = _activity(tag, {"concurrency": {"limit": 1}})
    aid = await db.seed_activity(db_pool, etype, flow=flow, tasks=_BLOCK)
    w1, w2 = (ids.event_workflow_id(aid, f"{e}-{tag}") for e in ("e1", "e2"))
    blocker = Blocker()
    async with slot_worker(registry_with(block=blocker.handler())):
        s = await _route(cfg, temporal, db_pool, group, [db.event(etype, f"e1-{tag}", order="o1")])
        await eventually(lambda: _true(bool(blocker.entered)), 30, "e1's task to start")
        s = await _route(cfg, temporal, db_pool, group, [db.event(etype, f"e2-{tag}", order="o2")])
        assert s.started == 1
        await eventually(lambda: _waiting(db_pool, aid, 1), 30, "e2 to queue")
        s = await _route(
            cfg, temporal, db_pool, group, [db.event(f"cx.{tag}", f"c-{tag}", order="o2")]
        )
        assert s.cancelled == 1
        await eventually(lambda: _is(temporal, w2, WorkflowExecutionStatus.CANCELED), 30, "e2")
        assert await _run(db_pool, w2) == {"status": "cancelled", "ended_by": f"cancel_on:c-{tag}"}
        assert await _waiting(db_pool, aid, 0)
        assert await _status(temporal, w1) == WorkflowExecutionStatus.RUNNING
        await _route(cfg, temporal, db_pool, group, [db.event(f"cx.{tag}", f"d-{tag}", order="o1")])
        await eventually(lambda: _is(temporal, w1, WorkflowExecutionStatus.CANCELED), 30, "e1")
        held = await db_pool.fetchval(
            "SELECT count(*) FROM permit_slots WHERE resource LIKE $1 AND ended_at IS NULL",
            f"flow.{aid}%",
        )
        assert held == 0  # the slot was released


def _cx(tag: str, name: str, order: str) -> bytes:
    """A cancelling event of the test's type."""
    return db.event(f"cx.{tag}", f"{name}-{tag}", order=order)


async def _true(v: bool) -> bool:
    return v


async def _is(temporal: Any, wid: str, status: WorkflowExecutionStatus) -> bool:
    return await _status(temporal, wid) == status


async def _waiting(pool: Any, aid: str, n: int) -> bool:
    got = await pool.fetchval(
        "SELECT count(*) FROM flow_waiters WHERE resource LIKE $1", f"flow.{aid}%"
    )
    return int(got) == n
