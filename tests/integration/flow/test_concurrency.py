"""flow.concurrency and flow.priority on the real Temporal and PostgreSQL: runs hold a
slot per key value around their tasks, a PostgreSQL row (workers/flow/slot.py).

Intervals come from ``flow_visits`` (the database's clock), written by the task itself.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from datetime import datetime
from typing import Any
from unittest.mock import ANY

import asyncpg
import pytest
from prometheus_client import REGISTRY
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError

from router.flow.concurrency_view import concurrency_rows
from schemas.ids import flow_resource, permit_workflow_id
from tests.integration.permits.handlers import max_inside
from tests.support.runs import event_run, local_activity_types, registry_with, start_run
from tests.support.wait import eventually
from workers.flow.part import refresh_gauges as refresh_flow_gauges

from .slot_handlers import FLOW_VISITS_DDL, flow_visit, insert_flow_activity


@pytest.fixture
async def flow_pool(db_pool: asyncpg.Pool) -> asyncpg.Pool:
    await db_pool.execute(FLOW_VISITS_DDL)
    return db_pool


def _registry(pool: asyncpg.Pool) -> Any:
    async def handler(ctx: Any) -> None:
        await flow_visit(pool, ctx)

    return registry_with(flow_visit=handler)


async def _visits(pool: asyncpg.Pool) -> list[asyncpg.Record]:
    return list(await pool.fetch("SELECT * FROM flow_visits ORDER BY entered_at, id"))


async def assert_nothing_leaked(pool: asyncpg.Pool, temporal: Client, resources: list[str]) -> None:
    """No waiter, no resource row, no slot row, and no permit run of any slot (a flow
    slot is a row, never a PermitSlotWorkflow)."""
    assert await pool.fetchval("SELECT count(*) FROM flow_waiters") == 0
    assert await pool.fetchval("SELECT count(*) FROM flow_slot_keys") == 0
    assert await pool.fetchval("SELECT count(*) FROM permit_slots") == 0
    for resource in resources:
        for slot in ("0", "1"):
            try:
                desc = await temporal.get_workflow_handle(
                    permit_workflow_id(resource, slot)
                ).describe()
            except Exception:  # never started: nothing held
                continue
            assert desc.status != WorkflowExecutionStatus.RUNNING, (resource, slot)


async def test_thirty_runs_over_three_keys_never_exceed_two_per_key(
    cfg, temporal, flow_pool, slot_worker
):
    pool = flow_pool
    activity_id = await insert_flow_activity(pool, {"concurrency": {"limit": 2, "key": "data.k"}})
    # k0's runs are slow: the fast keys must not queue behind them (head-of-line). The fast
    # ones hold long enough (0.6 s) that two admitted together are surely inside together.
    hold = {"k0": 2.5, "k1": 0.6, "k2": 0.6}
    runs = [
        event_run(activity_id, data={"k": k, "hold": hold[k]})
        for _ in range(10)
        for k in ("k0", "k1", "k2")
    ]
    async with slot_worker(_registry(pool)):
        handles = await asyncio.gather(
            *(start_run(temporal, r, cfg.temporal.task_queue) for r in runs)
        )
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 240)
        # The last release cleans its resource up: wait for it, then nothing may be left.
        await eventually(
            lambda: _zero(pool, "SELECT count(*) FROM flow_slot_keys"), 30, "keys cleaned up"
        )

    assert [(r.status, r.tasks_succeeded) for r in results] == [("succeeded", 1)] * 30
    visits = await _visits(pool)
    assert sorted(v["run_id"] for v in visits) == sorted(r.run_id for r in runs)
    by_key: dict[str, list[tuple[datetime, datetime]]] = defaultdict(list)
    for v in visits:
        by_key[v["key"]].append((v["entered_at"], v["exited_at"]))
    peaks = {k: max_inside(iv) for k, iv in by_key.items()}
    # At most 2 per key, and the limit is per key: the keys overlapped each other.
    assert peaks == {"k0": 2, "k1": 2, "k2": 2}, peaks
    assert max_inside([iv for ivs in by_key.values() for iv in ivs]) > 2
    # No head-of-line blocking: every fast run was done before the slow key's last entry.
    last_slow_entry = max(a for a, _ in by_key["k0"])
    fast_exits = [b for k in ("k1", "k2") for _, b in by_key[k]]
    assert max(fast_exits) < last_slow_entry, (max(fast_exits), last_slow_entry)
    await assert_nothing_leaked(
        pool, temporal, [flow_resource(activity_id, k) for k in ("k0", "k1", "k2")]
    )


async def _zero(pool: asyncpg.Pool, sql: str) -> bool:
    return bool(await pool.fetchval(sql) == 0)


async def test_priority_orders_the_waiting_runs(cfg, temporal, flow_pool, slot_worker):
    """Limit 1: the runs queued behind a held slot start by priority, then by arrival;
    priority-1 runs go before the priority-5 runs that arrived earlier."""
    pool = flow_pool
    await pool.execute("INSERT INTO flow_gates VALUES ('g', false)")
    activity_id = await insert_flow_activity(
        pool, {"concurrency": {"limit": 1}, "priority": {"key": "data.p"}}
    )
    blocker = event_run(activity_id, data={"p": 3, "gate": "g"})
    late = [event_run(activity_id, data={"p": 5}) for _ in range(3)]
    early = [event_run(activity_id, data={"p": 1}) for _ in range(3)]

    async def waiting(n: int) -> bool:
        return bool(await pool.fetchval("SELECT count(*) FROM flow_waiters") == n)

    async with slot_worker(_registry(pool)):
        q = cfg.temporal.task_queue
        handles = [await start_run(temporal, blocker, q)]
        await eventually(lambda: _inside(pool, blocker.run_id), 60, "blocker inside")
        handles += [await start_run(temporal, r, q) for r in late]
        await eventually(lambda: waiting(3), 60, "3 waiting")
        handles += [await start_run(temporal, r, q) for r in early]
        await eventually(lambda: waiting(6), 60, "6 waiting")
        # The queue as it stands (the blocker still holds the only slot).
        queued = [
            r["holder"]
            for r in await pool.fetch("SELECT holder FROM flow_waiters ORDER BY priority, seq")
        ]
        assert await _inside(pool, blocker.run_id)
        # What `ingest flow list` and the gauges show meanwhile.
        assert await concurrency_rows(pool, activity_id) == [
            {
                "activity_id": activity_id,
                "key": "",
                "slots_in_use": 1,
                "waiting": 6,
                "concurrency_limit": 1,
                "oldest_wait_seconds": ANY,
            }
        ]
        await refresh_flow_gauges(pool)
        gauges = {
            name: REGISTRY.get_sample_value(name, {"activity": activity_id})
            for name in ("pipeline_flow_slots_in_use", "pipeline_flow_runs_waiting")
        }
        assert gauges == {"pipeline_flow_slots_in_use": 1, "pipeline_flow_runs_waiting": 6}
        oldest = REGISTRY.get_sample_value(
            "pipeline_flow_oldest_wait_seconds", {"activity": activity_id}
        )
        assert oldest is not None and oldest > 0
        await pool.execute("UPDATE flow_gates SET open = true")
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 120)

    assert {r.status for r in results} == {"succeeded"}
    by_wf = {r.workflow_id: r.run_id for r in (blocker, *late, *early)}
    order = [v["run_id"] for v in await _visits(pool)]
    assert order == [blocker.run_id, *(by_wf[h] for h in queued)]
    # Priority first: the three priority-1 runs (which arrived last) went first.
    assert set(order[1:4]) == {r.run_id for r in early}
    assert set(order[4:]) == {r.run_id for r in late}
    waits = REGISTRY.get_sample_value("pipeline_flow_wait_seconds_count", {"activity": activity_id})
    assert waits == 7  # every run observed its wait once (the blocker's was ~0)
    assert await concurrency_rows(pool, activity_id) == []  # cleaned up once idle
    await refresh_flow_gauges(pool)
    assert REGISTRY.get_sample_value("pipeline_flow_runs_waiting", {"activity": activity_id}) == 0


async def _inside(pool: asyncpg.Pool, run_id: str) -> bool:
    n = await pool.fetchval(
        "SELECT count(*) FROM flow_visits WHERE run_id = $1 AND exited_at IS NULL", run_id
    )
    return bool(n == 1)


async def test_a_bad_priority_fails_the_plan_naming_the_field(
    cfg, temporal, flow_pool, slot_worker
):
    pool = flow_pool
    activity_id = await insert_flow_activity(
        pool, {"concurrency": {"limit": 1}, "priority": {"key": "data.p"}}
    )
    run = event_run(activity_id, data={"p": 9})
    async with slot_worker(_registry(pool)):
        handle = await start_run(temporal, run, cfg.temporal.task_queue)
        with pytest.raises(WorkflowFailureError) as info:
            await asyncio.wait_for(handle.result(), 60)
    assert "flow.priority.key 'data.p': is 9, not an integer 1..5" in str(info.value.cause)
    assert await pool.fetchval("SELECT count(*) FROM flow_visits") == 0


async def test_the_slot_is_released_on_failure_and_on_cancel(cfg, temporal, flow_pool, slot_worker):
    """Limit 1: a run whose task fails, a run cancelled while it waits and a run
    cancelled while it holds the slot all give it up; the last run still gets it."""
    pool = flow_pool
    await pool.execute("INSERT INTO flow_gates VALUES ('g', false)")
    activity_id = await insert_flow_activity(pool, {"concurrency": {"limit": 1}})
    failing = event_run(activity_id, data={"fail": True})
    holder = event_run(activity_id, data={"gate": "g"})
    waiter = event_run(activity_id)
    last = event_run(activity_id)

    async def waiting(*runs: Any) -> bool:
        rows = await pool.fetch("SELECT holder FROM flow_waiters")
        return {r["holder"] for r in rows} == {r.workflow_id for r in runs}

    q = cfg.temporal.task_queue
    async with slot_worker(_registry(pool)):
        failed = await (await start_run(temporal, failing, q)).result()
        assert failed.status == "failed"
        h_holder = await start_run(temporal, holder, q)
        await eventually(lambda: _inside(pool, holder.run_id), 60, "holder inside")
        h_waiter = await start_run(temporal, waiter, q)
        await eventually(lambda: waiting(waiter), 60, "waiter queued")
        await h_waiter.cancel()
        await eventually(lambda: waiting(), 60, "the cancelled waiter left the queue")
        h_last = await start_run(temporal, last, q)
        await eventually(lambda: waiting(last), 60, "last queued")
        await h_holder.cancel()  # its task is cancelled too; the slot must come free
        result = await asyncio.wait_for(h_last.result(), 120)
        await eventually(
            lambda: _zero(pool, "SELECT count(*) FROM flow_slot_keys"), 30, "key cleaned up"
        )
        for h in (h_holder, h_waiter):
            assert (await h.describe()).status == WorkflowExecutionStatus.CANCELED

    assert result.status == "succeeded"
    entered = [v["run_id"] for v in await _visits(pool)]
    assert entered == [failing.run_id, holder.run_id, last.run_id]  # the waiter never ran
    await assert_nothing_leaked(pool, temporal, [flow_resource(activity_id, None)])


async def test_a_terminated_holder_s_slot_is_freed_without_waiting_for_the_lease(
    cfg, temporal, flow_pool, slot_worker
):
    """Limit 1, lease 3600 s: an operator terminates the run holding the slot (it runs no
    release); the run waiting behind it gets the slot once Temporal reports the holder
    closed (flow_activities: the head of the queue checks the oldest holders)."""
    pool = flow_pool
    await pool.execute("INSERT INTO flow_gates VALUES ('g', false)")
    activity_id = await insert_flow_activity(pool, {"concurrency": {"limit": 1}})
    holder = event_run(activity_id, data={"gate": "g"})
    waiter = event_run(activity_id)
    q = cfg.temporal.task_queue
    async with slot_worker(_registry(pool)):
        h_holder = await start_run(temporal, holder, q)
        await eventually(lambda: _inside(pool, holder.run_id), 60, "holder inside")
        h_waiter = await start_run(temporal, waiter, q)
        await eventually(
            lambda: _zero(pool, "SELECT count(*) - 1 FROM flow_waiters"), 60, "waiter queued"
        )
        await h_holder.terminate("operator")
        try:
            result = await asyncio.wait_for(h_waiter.result(), 90)
        finally:
            await pool.execute("UPDATE flow_gates SET open = true")  # the orphaned handler
        await eventually(
            lambda: _zero(pool, "SELECT count(*) FROM flow_slot_keys"), 30, "key cleaned up"
        )
    assert result.status == "succeeded"
    assert (await h_holder.describe()).status == WorkflowExecutionStatus.TERMINATED
    assert [v["run_id"] for v in await _visits(pool)] == [holder.run_id, waiter.run_id]
    await assert_nothing_leaked(pool, temporal, [flow_resource(activity_id, None)])


async def test_a_run_under_the_limit_holds_its_slot_with_no_step_of_its_own(
    cfg, temporal, flow_pool, slot_worker
):
    """The first admission round runs in start_run and the release in finish_run: a run
    that finds a free slot records the same steps as a run without flow control."""
    pool = flow_pool
    activity_id = await insert_flow_activity(pool, {"concurrency": {"limit": 5}})
    gate = f"g-{activity_id}"  # the task stays inside until the slot has been read
    await pool.execute("INSERT INTO flow_gates VALUES ($1, false)", gate)
    run = event_run(activity_id, data={"gate": gate})
    async with slot_worker(_registry(pool)):
        handle = await start_run(temporal, run, cfg.temporal.task_queue)
        await eventually(lambda: _inside(pool, run.run_id), 60, "inside its task")
        held = await pool.fetch(
            "SELECT holder, token FROM permit_slots WHERE resource = $1 AND ended_at IS NULL",
            flow_resource(activity_id, None),
        )
        await pool.execute("UPDATE flow_gates SET open = true WHERE name = $1", gate)
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == "succeeded"
    assert [(r["holder"], r["token"]) for r in held] == [(run.workflow_id, 1)]
    assert await local_activity_types(handle) == ["start_run", "finish_run"]
    await assert_nothing_leaked(pool, temporal, [flow_resource(activity_id, None)])
