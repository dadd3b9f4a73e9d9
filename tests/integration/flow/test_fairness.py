"""flow.fairness reaches Temporal: the run carries the fairness key and weight, and so do
its task child and the child's activity, read back from the server.

Nothing is passed to the child or the activity: the server merges the run's priority
into what they are started with (history's ``priorities.Merge``). The child's own
execution shows it (describe, its started event); an activity's own record does not
(its pending info and scheduled event show what the workflow set: nothing), but the
task matching dispatched, and the worker received, does: ``activity.info().priority``
(on the real server; see the test). In the real-server subset (tests/conftest.py).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from devstack.settings import StackSettings
from temporalio import activity
from temporalio.api.common.v1 import Priority as PriorityProto
from temporalio.client import Client, WorkflowHandle
from temporalio.common import Priority

from pipeline.starter import STARTED, Starter
from router.settings import RouterSettings
from schemas.flow.fairness import Fairness
from schemas.ids import event_workflow_id, task_workflow_id
from tests.support import db, kafka
from tests.support.routing import route_until_committed
from tests.support.runs import event_run, insert_activity, registry_with, worker_factory
from workers.handlers.base import TaskContext


def _fair(p: PriorityProto) -> tuple[int, str, float]:
    return (p.priority_key, p.fairness_key, round(p.fairness_weight, 3))


async def _started_priority(handle: WorkflowHandle[Any, Any]) -> PriorityProto:
    async for e in handle.fetch_history_events():
        if e.HasField("workflow_execution_started_event_attributes"):
            return e.workflow_execution_started_event_attributes.priority
    raise AssertionError(f"{handle.id} has no started event")


async def _until(check: Any, what: str, timeout: float = 30.0) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        got = await check()
        if got:
            return got
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


async def test_run_child_and_activity_carry_the_fairness(
    cfg, temporal: Client, task_queue, db_pool
) -> None:
    worker = worker_factory(cfg, temporal, db_pool)
    release = asyncio.Event()
    received: list[Priority] = []

    async def held(ctx: TaskContext) -> None:  # a regular (not short) activity: it queues
        received.append(activity.info().priority)
        await release.wait()

    activity_id = await insert_activity(db_pool, [{"type": "held_fair"}])
    run = event_run(activity_id, data={"tenant": "acme"})
    plain = event_run(activity_id)
    async with worker(registry=registry_with(held_fair=held)):
        starter = Starter(temporal, task_queue)
        assert await starter.start(run, priority=2, fairness=Fairness("acme", 2.5)) == STARTED
        parent = temporal.get_workflow_handle(run.workflow_id)
        child = temporal.get_workflow_handle(task_workflow_id(run.run_id, "held_fair", 0))

        async def pending() -> list[Any]:
            try:
                return list((await child.describe()).raw_description.pending_activities)
            except Exception:  # not started yet: NOT_FOUND
                return []

        await _until(pending, "the task's activity to be pending")
        want = (2, "acme", 2.5)
        assert _fair((await parent.describe()).raw_info.priority) == want
        assert _fair((await child.describe()).raw_info.priority) == want
        release.set()
        await parent.result()
        # What the histories keep, and what the activity's worker received.
        assert _fair(await _started_priority(parent)) == want
        assert _fair(await _started_priority(child)) == want
        # The real server (1.31) hands the activity's worker the merged priority; the dev
        # server (the CLI's embedded 1.32) hands it nothing, though the run and child carry it.
        merged = (2, "acme", 2.5) if StackSettings().temporal == "server" else (None, None, None)
        assert [(p.priority_key, p.fairness_key, p.fairness_weight) for p in received] == [merged]
        # A run without fairness sends exactly what it sent before: nothing set.
        assert await starter.start(plain) == STARTED
        await temporal.get_workflow_handle(plain.workflow_id).result()
        plain_child = temporal.get_workflow_handle(task_workflow_id(plain.run_id, "held_fair", 0))
        nothing = (0, "", 0.0)
        plain_run = temporal.get_workflow_handle(plain.workflow_id)
        assert _fair(await _started_priority(plain_run)) == nothing
        assert _fair((await plain_child.describe()).raw_info.priority) == nothing
        assert received[1] == Priority.default


async def test_the_router_sends_the_events_fairness_and_refuses_a_bad_weight(
    cfg, temporal: Client, db_pool
) -> None:
    tag = uuid.uuid4().hex[:8]
    etype = f"fair.{tag}"
    flow = {"fairness": {"key": "data.tenant", "weight_key": "data.w"}}
    aid = await db.seed_activity(db_pool, etype, flow=flow)
    good, bad = f"good-{tag}", f"bad-{tag}"
    await kafka.produce(
        cfg.kafka.bootstrap_servers,
        cfg.kafka.events_topic,
        [
            (b"k", db.event(etype, good, tenant="acme", w=3), []),
            (b"k", db.event(etype, bad, tenant="acme", w=0), []),
        ],
    )
    router = await route_until_committed(
        cfg, RouterSettings(group=f"f-{tag}", commit_interval_ms=100), temporal, db_pool
    )
    assert (router.routing.stats.started, router.routing.stats.dlq) == (1, 1)
    handle = temporal.get_workflow_handle(event_workflow_id(aid, good))
    assert _fair((await handle.describe()).raw_info.priority) == (0, "acme", 3.0)
    await handle.terminate("test over: no worker serves this queue")
    [dead] = await kafka.read_all(cfg.kafka.bootstrap_servers, cfg.kafka.dlq_topic)
    headers = dict(dead.headers)
    assert headers["dlq_reason"] == b"bad_flow_key"
    assert b"flow.fairness.weight_key 'data.w': is 0" in headers["dlq_detail"]
