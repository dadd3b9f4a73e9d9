"""Holding an activity (``ingest activities pause``/``resume``) on the real Temporal and
PostgreSQL: the worker records a paused activity's runs ``held`` and starts no task
until the resume (workers/hold.py); ``--skip-held`` records them skipped.

Task visits come from ``flow_visits`` (written by the task itself, the database's clock).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import asyncpg
import pytest
from prometheus_client import REGISTRY
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle

from definitions import pause
from pipeline.settings import Settings
from schemas.workflow_io import RunActivityInput
from tests.integration.flow.slot_handlers import FLOW_VISITS_DDL, flow_visit, insert_flow_activity
from tests.integration.permits.handlers import max_inside
from tests.support.runs import (
    event_run,
    insert_activity,
    local_activity_types,
    registry_with,
    start_run,
    worker_factory,
)
from tests.support.wait import eventually
from workers.flow.part import flow_part
from workers.hold_activities import HoldGauges
from workers.parts import core_part

Worker = Callable[[], AbstractAsyncContextManager[None]]


@pytest.fixture
async def pool(db_pool: asyncpg.Pool) -> asyncpg.Pool:
    await db_pool.execute(FLOW_VISITS_DDL)
    return db_pool


@pytest.fixture
def worker(cfg: Settings, temporal: Client, pool: asyncpg.Pool) -> Worker:
    """``async with worker()``: the runs part and the flow part, tasks record visits."""
    factory = worker_factory(cfg, temporal, pool)

    async def handler(ctx: Any) -> None:
        await flow_visit(pool, ctx)

    @asynccontextmanager
    async def run() -> AsyncIterator[None]:
        async with factory(
            registry=registry_with(flow_visit=handler), parts=(core_part, flow_part)
        ):
            yield

    return run


async def _status(pool: asyncpg.Pool, run: RunActivityInput) -> str | None:
    return await pool.fetchval(  # type: ignore[no-any-return]
        "SELECT status FROM activity_runs WHERE run_id = $1::uuid", run.run_id
    )


async def _start_held(
    temporal: Client, pool: asyncpg.Pool, runs: list[RunActivityInput], queue: str
) -> list[WorkflowHandle[Any, Any]]:
    """Start the runs one after the other, each recorded held before the next starts (so
    their triggers' order is the order of their rows)."""
    handles = []
    for r in runs:
        handles.append(await start_run(temporal, r, queue))

        async def held(r: RunActivityInput = r) -> bool:
            return await _status(pool, r) == "held"

        await eventually(held, 60, f"{r.run_id} held")
    return handles


async def _activity(pool: asyncpg.Pool, activity_id: str) -> pause.Activity:
    act = await pause.find(pool, activity_id)
    assert act is not None
    return act


async def test_held_runs_start_no_task_then_all_run_once_on_resume(cfg, temporal, pool, worker):
    activity_id = await insert_flow_activity(pool, {})
    act = await _activity(pool, activity_id)
    paused = await pause.pause(pool, act, "tester", "maintenance")
    assert (paused.changed, paused.paused_by, paused.reason, paused.held) == (
        True, "tester", "maintenance", 0,
    )  # fmt: skip
    again = await pause.pause(pool, act, "someone else", None)  # idempotent: first one kept
    assert (again.changed, again.paused_at, again.paused_by) == (False, paused.paused_at, "tester")
    runs = [event_run(activity_id, data={"hold": 0.05}) for _ in range(5)]
    async with worker():
        handles = await _start_held(temporal, pool, runs, cfg.temporal.task_queue)
        await asyncio.sleep(2)  # time for a task to start, if the hold let one
        assert await pool.fetchval("SELECT count(*) FROM task_instances") == 0
        assert await pool.fetchval("SELECT count(*) FROM flow_visits") == 0
        assert [await _status(pool, r) for r in runs] == ["held"] * 5
        for h in handles:
            assert (await h.describe()).status == WorkflowExecutionStatus.RUNNING
        # What the operator sees: the listing's state, the gauges.
        state = (await pause.states(pool))[activity_id]
        assert (state[1], state[2]) == ("tester", 5)
        gauges = HoldGauges()  # as the worker's runs part refreshes them
        await gauges.refresh(pool)
        labels = {"activity": activity_id}
        assert REGISTRY.get_sample_value("pipeline_activity_held_runs", labels) == 5
        assert REGISTRY.get_sample_value("pipeline_activity_paused", labels) == 1
        assert REGISTRY.get_sample_value("pipeline_runs_held_total", labels) == 5

        resumed = await pause.resume(pool, act, "tester", skip_held=False)
        assert resumed.was_paused and resumed.skipped == []
        assert resumed.held == [r.workflow_id for r in runs]  # oldest trigger first
        sent, gone = await pause.signal_held(temporal, resumed.held)
        assert (sent, gone) == (5, [])
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 90)
        # The held run's history: start_run, one hold_check (the pause was set), and, after
        # the signal, a second that resumed it; then its task.
        kinds = await local_activity_types(handles[0])
        assert kinds[:3] == ["start_run", "hold_check", "hold_check"], kinds

    assert [(r.status, r.tasks_succeeded) for r in results] == [("succeeded", 1)] * 5
    visits = await pool.fetch("SELECT run_id, entered_at FROM flow_visits ORDER BY entered_at, id")
    assert sorted(v["run_id"] for v in visits) == sorted(r.run_id for r in runs)  # once each
    assert [await _status(pool, r) for r in runs] == ["succeeded"] * 5
    await gauges.refresh(pool)
    assert REGISTRY.get_sample_value("pipeline_activity_held_runs", {"activity": activity_id}) == 0
    assert REGISTRY.get_sample_value("pipeline_activity_paused", {"activity": activity_id}) == 0
    released = REGISTRY.get_sample_value(
        "pipeline_runs_released_total", {"activity": activity_id, "outcome": "resumed"}
    )
    assert released == 5
    audit = await pool.fetch(
        "SELECT action, actor, reason, held, skipped FROM activity_pauses"
        " WHERE activity_id = $1::uuid ORDER BY id",
        activity_id,
    )
    assert [tuple(a) for a in audit] == [
        ("pause", "tester", "maintenance", 0, 0),
        ("resume", "tester", None, 5, 0),
    ]


async def test_skip_held_records_the_runs_skipped_and_runs_no_task(cfg, temporal, pool, worker):
    activity_id = await insert_flow_activity(pool, {})
    act = await _activity(pool, activity_id)
    await pause.pause(pool, act, "tester", None)
    runs = [event_run(activity_id) for _ in range(3)]
    async with worker():
        handles = await _start_held(temporal, pool, runs, cfg.temporal.task_queue)
        resumed = await pause.resume(pool, act, "tester", skip_held=True)
        assert resumed.held == [] and resumed.skipped == [r.workflow_id for r in runs]
        assert await pause.signal_held(temporal, resumed.skipped) == (3, [])
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 60)
        # A run of the same activity started after the resume runs as usual.
        after = event_run(activity_id)
        done = await (await start_run(temporal, after, cfg.temporal.task_queue)).result()

    assert [(r.status, r.tasks_total, r.tasks_skipped) for r in results] == [("skipped", 1, 1)] * 3
    rows = await pool.fetch(
        "SELECT status, ended_by, finished_at IS NOT NULL AS finished FROM activity_runs"
        " WHERE run_id = ANY($1::uuid[])",
        [r.run_id for r in runs],
    )
    assert [tuple(r) for r in rows] == [("skipped", "held:skipped", True)] * 3
    assert await pool.fetchval("SELECT count(*) FROM task_instances") == 1  # `after`'s only
    assert (done.status, await _status(pool, after)) == ("succeeded", "succeeded")
    audit = await pool.fetchrow("SELECT held, skipped FROM activity_pauses WHERE action = 'resume'")
    assert tuple(audit) == (3, 3)


async def test_a_held_run_takes_no_concurrency_slot_until_resumed(cfg, temporal, pool, worker):
    """flow.concurrency limit 1: held runs hold no slot and queue nowhere; after the
    resume they take the slot one at a time."""
    activity_id = await insert_flow_activity(pool, {"concurrency": {"limit": 1}})
    act = await _activity(pool, activity_id)
    await pause.pause(pool, act, "tester", None)
    runs = [event_run(activity_id, data={"hold": 0.3}) for _ in range(3)]
    async with worker():
        handles = await _start_held(temporal, pool, runs, cfg.temporal.task_queue)
        assert await pool.fetchval("SELECT count(*) FROM permit_slots") == 0
        assert await pool.fetchval("SELECT count(*) FROM flow_waiters") == 0
        resumed = await pause.resume(pool, act, "tester", skip_held=False)
        await pause.signal_held(temporal, resumed.held)
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 90)
    assert [r.status for r in results] == ["succeeded"] * 3
    visits = await pool.fetch("SELECT entered_at, exited_at FROM flow_visits")
    assert len(visits) == 3
    assert max_inside([(v["entered_at"], v["exited_at"]) for v in visits]) == 1


async def test_a_resume_whose_signal_was_lost_is_found_by_the_next_check(
    cfg, temporal, pool, worker
):
    """The pause cleared by hand (no signal): the held run's timer round finds it."""
    activity_id = await insert_activity(pool, [{"type": "noop"}])
    act = await _activity(pool, activity_id)
    await pause.pause(pool, act, "tester", None)
    run = event_run(activity_id)
    async with worker():
        (handle,) = await _start_held(temporal, pool, [run], cfg.temporal.task_queue)
        await pool.execute(
            "UPDATE activities SET paused_at = NULL WHERE id = $1::uuid", activity_id
        )
        result = await asyncio.wait_for(handle.result(), 60)  # the first round is at 10 s
    assert result.status == "succeeded"


async def test_a_run_of_an_activity_never_paused_has_no_hold_step(cfg, temporal, pool, worker):
    activity_id = await insert_activity(pool, [{"type": "noop"}])
    async with worker():
        handle = await start_run(temporal, event_run(activity_id), cfg.temporal.task_queue)
        assert (await handle.result()).status == "succeeded"
    kinds = await local_activity_types(handle)
    assert "hold_check" not in kinds and kinds[0] == "start_run", kinds
    timers = [
        e
        async for e in handle.fetch_history_events()
        if e.HasField("timer_started_event_attributes")
    ]
    assert timers == []
