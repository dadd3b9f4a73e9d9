"""RunActivityWorkflow end to end on the real Temporal, PostgreSQL and Kafka."""

from __future__ import annotations

import asyncio
import uuid

import orjson
import pytest
from prometheus_client import REGISTRY
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import WorkflowAlreadyStartedError

from pipeline import kafka
from schemas.ids import task_workflow_id
from schemas.workflow_io import TaskInstanceResult
from tests.support.outbox import running_relay
from tests.support.runs import (
    event_run,
    insert_activity,
    local_activity_types,
    registry_with,
    start_run,
)
from workers.handlers import TaskContext
from workers.handlers.base import register


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def runs(pool, activity_id: str) -> list:
    return await pool.fetch("SELECT * FROM activity_runs WHERE activity_id = $1::uuid", activity_id)


async def tasks(pool, run_id: str) -> list:
    return await pool.fetch(
        "SELECT * FROM task_instances WHERE run_id = $1::uuid ORDER BY index", run_id
    )


async def consume_all(cfg, topic: str, want: int) -> list:
    consumer = kafka.consumer(cfg.kafka, topic, group_id=None)
    await consumer.start()
    got: list = []
    try:
        async with asyncio.timeout(30):
            while len(got) < want:
                batch = await consumer.getmany(timeout_ms=1000)
                got += [m for ms in batch.values() for m in ms]
    finally:
        await consumer.stop()
    return got


async def test_run_logs_once_runs_every_task_and_emits(cfg, temporal, db_pool, topics, worker):
    activity_id = await insert_activity(
        db_pool, [{"type": "noop", "count": 2}, {"type": "emit", "payload": {"kind": "hello"}}]
    )
    run = event_run(activity_id, data={"message_id": "m-1"})
    inserted_before = metric("pipeline_runs_logged_total", result="inserted")
    ok_before = metric("pipeline_task_instances_total", task_type="noop", status="succeeded")
    async with worker(emit_topic=topics.out):
        result = await (await start_run(temporal, run, cfg.temporal.task_queue)).result()

    assert (result.status, result.tasks_total, result.tasks_succeeded) == ("succeeded", 3, 3)
    (row,) = await runs(db_pool, activity_id)
    assert str(row["run_id"]) == run.run_id and row["workflow_id"] == run.workflow_id
    assert (row["trigger_kind"], row["event_id"], row["status"]) == ("event", run.event_id,
                                                                      "succeeded")  # fmt: skip
    assert row["finished_at"] is not None
    rows = await tasks(db_pool, run.run_id)
    expected = [task_workflow_id(run.run_id, t, i) for i, t in enumerate(["noop", "noop", "emit"])]
    assert [r["id"] for r in rows] == expected
    assert {(r["status"], r["attempts"], r["last_error"]) for r in rows} == {("succeeded", 1, None)}
    assert orjson.loads(rows[2]["payload"])["kind"] == "hello"
    assert metric("pipeline_runs_logged_total", result="inserted") == inserted_before + 1
    assert (
        metric("pipeline_task_instances_total", task_type="noop", status="succeeded")
        == ok_before + 2
    )

    async with running_relay(cfg):  # emit writes the outbox; the relay publishes it
        (msg,) = await consume_all(cfg, topics.out, 1)
    assert msg.key == expected[2].encode()
    body = orjson.loads(msg.value)
    assert body["kind"] == "hello"
    assert body["event"]["data"] == {"message_id": "m-1"}
    assert body["trigger"]["run_id"] == run.run_id
    assert dict(msg.headers)["task_id"] == expected[2].encode()


async def test_same_workflow_id_twice_is_rejected_and_logged_once(cfg, temporal, db_pool, worker):
    activity_id = await insert_activity(db_pool, [{"type": "noop"}])
    run = event_run(activity_id)
    async with worker():
        await (await start_run(temporal, run, cfg.temporal.task_queue)).result()
        with pytest.raises(WorkflowAlreadyStartedError):
            await start_run(temporal, run, cfg.temporal.task_queue)
    assert len(await runs(db_pool, activity_id)) == 1
    assert len(await tasks(db_pool, run.run_id)) == 1


async def test_shared_idempotency_key_runs_once(cfg, temporal, db_pool, worker):
    ran: list[str] = []

    async def record(ctx: TaskContext) -> None:
        ran.append(ctx.task_id)

    key = {"type": "record", "idempotency_key": "{data.message_id}"}
    activity_id = await insert_activity(db_pool, [key, key])
    first = event_run(activity_id, data={"message_id": "m-7"})
    # A later trigger (another event, or the next hour's cron fire) with the same content.
    second = event_run(activity_id, data={"message_id": "m-7"})
    suppressed = ("pipeline_duplicates_suppressed_total", "worker", "event", "idempotency_key")
    before = metric(suppressed[0], component=suppressed[1], trigger=suppressed[2],
                    layer=suppressed[3])  # fmt: skip
    async with worker(registry=registry_with(record=record)):
        r1 = await (await start_run(temporal, first, cfg.temporal.task_queue)).result()
        r2 = await (await start_run(temporal, second, cfg.temporal.task_queue)).result()

    assert (r1.status, r1.tasks_succeeded, r1.tasks_duplicate) == ("succeeded", 1, 1)
    assert (r2.status, r2.tasks_succeeded, r2.tasks_duplicate) == ("succeeded", 0, 2)
    assert len(ran) == 1
    after = metric(suppressed[0], component=suppressed[1], trigger=suppressed[2],
                   layer=suppressed[3])  # fmt: skip
    assert after == before + 3
    holder = ran[0]
    rows = await tasks(db_pool, first.run_id) + await tasks(db_pool, second.run_id)
    by_status = {r["id"]: (r["status"], r["idempotency_key"], r["duplicate_of"]) for r in rows}
    assert by_status.pop(holder) == ("succeeded", "m-7", None)
    assert set(by_status.values()) == {("duplicate", None, holder)}
    assert len(by_status) == 3


async def test_a_local_task_is_claimed_run_and_finished_in_one_step(cfg, temporal, db_pool, worker):
    """A short handler's task records one step (run_local_task: claim, handler, finish);
    a duplicate's step finds the key held and runs no handler."""
    ran: list[str] = []

    @register("record_short", short=True)
    async def record_short(ctx: TaskContext) -> None:
        ran.append(ctx.task_id)

    key = {"type": "record_short", "idempotency_key": "{data.message_id}"}
    activity_id = await insert_activity(db_pool, [key, key])
    run = event_run(activity_id, data={"message_id": f"m-{uuid.uuid4()}"})
    async with worker(registry=registry_with(record_short=record_short)):
        result = await (await start_run(temporal, run, cfg.temporal.task_queue)).result()

    assert (result.status, result.tasks_succeeded, result.tasks_duplicate) == ("succeeded", 1, 1)
    rows = await tasks(db_pool, run.run_id)
    assert len(ran) == 1  # the two children race for the key: either may hold it
    states = {r["id"]: (r["status"], r["attempts"]) for r in rows}
    assert states.pop(ran[0]) == ("succeeded", 1)
    assert list(states.values()) == [("duplicate", 0)]
    for row in rows:
        steps = await local_activity_types(temporal.get_workflow_handle(row["id"]))
        assert steps == ["run_local_task"], row["id"]
    parent = temporal.get_workflow_handle(run.workflow_id)
    assert await local_activity_types(parent) == ["start_run", "finish_run"]


async def test_the_last_task_finishes_the_run_and_the_parent_writes_no_more(
    cfg, temporal, db_pool, worker
):
    """Four local tasks in parallel: the step that marks the last of them succeeded marks
    the run succeeded in the same statement; the parent records no finish step."""
    activity_id = await insert_activity(db_pool, [{"type": "noop", "count": 4}])
    run = event_run(activity_id)
    async with worker():
        result = await (await start_run(temporal, run, cfg.temporal.task_queue)).result()

    assert (result.status, result.tasks_succeeded) == ("succeeded", 4)
    parent = temporal.get_workflow_handle(run.workflow_id)
    assert await local_activity_types(parent) == ["start_run"]
    (row,) = await runs(db_pool, activity_id)
    assert (row["status"], row["tasks_succeeded"]) == ("succeeded", 4)
    rows = await tasks(db_pool, run.run_id)
    assert {r["status"] for r in rows} == {"succeeded"}
    # Same statement, same transaction time: the run's finished_at is the updated_at of
    # the task whose success finished it. (Not the latest updated_at: a task statement
    # that waited on the run's row lock carries its earlier transaction start time.)
    assert row["finished_at"] in {r["updated_at"] for r in rows}
    children = [
        await temporal.get_workflow_handle(r["id"], result_type=TaskInstanceResult).result()
        for r in rows
    ]
    assert sorted(c.run_finished for c in children) == [False, False, False, True]


async def activity_tasks_scheduled(temporal, workflow_id: str) -> int:
    history = await temporal.get_workflow_handle(workflow_id).fetch_history()
    return sum(e.HasField("activity_task_scheduled_event_attributes") for e in history.events)


async def test_failing_tasks_are_recorded_and_fail_the_run(cfg, temporal, db_pool, worker):
    calls: list[int] = []
    short_calls: list[int] = []

    async def flaky(ctx: TaskContext) -> None:
        calls.append(ctx.attempt)
        raise RuntimeError(f"transient #{ctx.attempt}")

    @register("flaky_short", short=True)  # retried as a local activity
    async def flaky_short(ctx: TaskContext) -> None:
        short_calls.append(ctx.attempt)
        raise RuntimeError(f"transient #{ctx.attempt}")

    retry_twice = {"max_attempts": 2, "retry_initial_seconds": 0.1}
    activity_id = await insert_activity(
        db_pool,
        [
            {"type": "fail", "config": {"message": "boom"}},
            {"type": "noop"},
            {"type": "flaky", "config": retry_twice},
            {"type": "nobody-handles-this"},
            {"type": "flaky_short", "config": retry_twice},
        ],
    )
    run = event_run(activity_id)
    registry = registry_with(flaky=flaky, flaky_short=flaky_short)
    async with worker(registry=registry):
        result = await (await start_run(temporal, run, cfg.temporal.task_queue)).result()

    assert (result.status, result.tasks_failed, result.tasks_succeeded) == ("failed", 4, 1)
    (row,) = await runs(db_pool, activity_id)
    assert row["status"] == "failed" and row["finished_at"] is not None
    assert row["tasks_succeeded"] == 1  # counted, short of the plan: the parent finished it
    parent = temporal.get_workflow_handle(run.workflow_id)
    assert await local_activity_types(parent) == ["start_run", "finish_run"]
    rows = {r["task_type"]: r for r in await tasks(db_pool, run.run_id)}
    assert rows["noop"]["status"] == "succeeded"
    assert (rows["fail"]["status"], rows["fail"]["attempts"]) == ("failed", 1)  # no retry
    assert rows["fail"]["last_error"] == "PermanentTaskError: boom"
    assert (rows["flaky"]["status"], rows["flaky"]["attempts"]) == ("failed", 2)
    assert "transient #2" in rows["flaky"]["last_error"]
    assert calls == [1, 2]
    assert rows["nobody-handles-this"]["status"] == "failed"
    assert rows["nobody-handles-this"]["last_error"].startswith("UnknownTaskType: no handler")
    # A short handler fails the same way, retried as a local activity.
    assert (rows["flaky_short"]["status"], rows["flaky_short"]["attempts"]) == ("failed", 2)
    assert rows["flaky_short"]["last_error"] == "RuntimeError: transient #2"
    assert short_calls == [1, 2]
    # Short handlers (fail, noop, flaky_short) made no activity task; the others made one
    # each (the server retries an activity within its one scheduled event).
    scheduled = {
        r["task_type"]: await activity_tasks_scheduled(temporal, r["id"])
        for r in await tasks(db_pool, run.run_id)
    }
    assert scheduled == {
        "fail": 0, "noop": 0, "flaky": 1, "nobody-handles-this": 1, "flaky_short": 0,
    }  # fmt: skip


async def test_unplannable_definition_fails_the_run_with_a_clear_error(
    cfg, temporal, db_pool, worker
):
    activity_id = await insert_activity(
        db_pool, [{"type": "noop", "idempotency_key": "{data.message_id}"}]
    )
    run = event_run(activity_id, data={})  # no message_id
    async with worker():
        handle = await start_run(temporal, run, cfg.temporal.task_queue)
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
    assert "data.message_id" in str(info.value.cause)
    (row,) = await runs(db_pool, activity_id)
    assert row["status"] == "failed"
    assert await tasks(db_pool, run.run_id) == []
