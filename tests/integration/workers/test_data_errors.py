"""PostgreSQL data errors in the worker end the task instead of retrying it for ever.

Issue 34, item 3: a task whose claim PostgreSQL cannot write (a NUL in its payload
fails ``$6::jsonb``, SQLSTATE 22P05; a random idempotency key of ~3,000 characters
fails the unique index, 54000) used to retry its bookkeeping step every 30 s without
limit: the run stayed ``running`` and kept its flow slot. Now a data error is never
retried (``workers.data_errors``): the task fails with the error class and SQLSTATE in
``last_error``, the run ends ``failed`` and releases its slot; and a long key is stored
as its digest (``workers.store.stored_key``), so that task runs and still dedupes.

Each run gets ``BOUND`` seconds: far more than the seconds it takes, far less than the
retries it used to make (1 s doubling to 30 s, for ever).
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import string
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg
import pytest
from temporalio import activity
from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.worker import Replayer

from definitions import store
from schemas.converter import DATA_CONVERTER
from schemas.definitions import ActivityDef, EventTrigger, TaskDef
from schemas.flow.io import FlowAcquired, FlowAcquireInput
from schemas.flow.spec import FlowDef
from schemas.ids import task_workflow_id
from schemas.workflow_io import FixRequest, FixState, RunActivityInput, RunActivityResult
from tests.support.runs import event_run, insert_activity, registry_with, start_run
from tests.support.wait import eventually
from workers.flow.part import flow_part
from workers.flow.slot_activities import FlowActivities
from workers.handlers import TaskContext
from workers.parts import CORE_WORKFLOW_MODULES, PartDeps, WorkerPart, core_part
from workers.permits.activities import PermitActivities
from workers.permits.part import permit_part
from workers.run_workflow import RunActivityWorkflow
from workers.sandbox import workflow_runner
from workers.task_workflow import TaskInstanceWorkflow

BOUND = 25.0
T = TypeVar("T")


async def _within(handle: WorkflowHandle, what: Awaitable[T]) -> T:
    """``what`` within BOUND s; past it the run is terminated (no run left running) and
    the test fails saying the run never ended."""
    bound = asyncio.timeout(BOUND)
    try:
        async with bound:
            return await what
    except Exception:  # an update's wait, cancelled, raises its own error, not TimeoutError
        if not bound.expired():
            raise
    await handle.terminate("test timed out: the run never ended")
    raise AssertionError(f"{handle.id} still running after {BOUND}s")


async def _result(temporal: Client, run: RunActivityInput, queue: str) -> RunActivityResult:
    handle = await start_run(temporal, run, queue)
    return await _within(handle, handle.result())


def _random_text(n: int) -> str:
    # Random text, not one repeated letter: PostgreSQL would compress that into the index.
    rng = random.Random(n)
    return "".join(rng.choices(string.ascii_letters + string.digits, k=n))


async def _tasks(pool: asyncpg.Pool, run_id: str) -> list[asyncpg.Record]:
    return list(
        await pool.fetch(
            "SELECT * FROM task_instances WHERE run_id = $1::uuid ORDER BY index", run_id
        )
    )


async def _slot_activity(pool: asyncpg.Pool, tasks: list[dict[str, Any]]) -> str:
    """An activity whose runs hold one slot per ``data.k`` (limit 1) around their tasks."""
    activity_id = str(uuid.uuid4())
    act = ActivityDef.model_construct(
        id=uuid.UUID(activity_id),
        name=f"test-{activity_id[:8]}",
        trigger=EventTrigger(type="event", event_type="test.event"),
        tasks=[TaskDef.model_construct(**t) for t in tasks],
        flow=FlowDef.model_validate({"concurrency": {"limit": 1, "key": "data.k"}}),
    )
    await store.upsert(pool, [act])
    return activity_id


async def _replays(temporal: Client, workflow_id: str) -> None:
    """The recorded history replays on this code (the new failure paths are deterministic)."""
    history = await temporal.get_workflow_handle(workflow_id).fetch_history()
    replayer = Replayer(
        workflows=[RunActivityWorkflow, TaskInstanceWorkflow],
        workflow_runner=workflow_runner(*CORE_WORKFLOW_MODULES),
        data_converter=DATA_CONVERTER,
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{workflow_id}: {result.replay_failure!r}"


async def _run_row(pool: asyncpg.Pool, run_id: str) -> asyncpg.Record:
    return await pool.fetchrow("SELECT * FROM activity_runs WHERE run_id = $1::uuid", run_id)


async def test_a_nul_in_the_payload_fails_the_tasks_and_the_run_and_frees_its_slot(
    cfg, temporal, db_pool, worker
):
    """A NUL in the event's data (inserted directly, past the edge's check): every task's
    claim fails with 22P05, whatever path claims it (a local task's handler step, a
    regular task's own step, a task that would pause), and the run ends failed at once,
    releasing its flow slot (limit 1: the next run of the key gets it)."""
    ran: list[str] = []

    async def record(ctx: TaskContext) -> None:  # a regular (not short) handler
        ran.append(ctx.task_id)

    activity_id = await _slot_activity(
        db_pool,
        [
            {"type": "noop"},  # short: claimed in its handler step
            {"type": "record"},  # regular: claimed by the workflow's own step
            {"type": "record", "on_failure": "pause"},
        ],
    )
    poison = event_run(activity_id, data={"k": "a", "text": "bad\u0000byte"})
    clean = event_run(activity_id, data={"k": "a", "text": "fine"})
    queue = cfg.temporal.task_queue
    async with worker(
        registry=registry_with(record=record), parts=(core_part, permit_part, flow_part)
    ):
        loop = asyncio.get_running_loop()
        began = loop.time()
        result = await _result(temporal, poison, queue)
        took = loop.time() - began
        ran_poisoned = list(ran)
        held = await db_pool.fetchval("SELECT count(*) FROM permit_slots WHERE ended_at IS NULL")
        after = await _result(temporal, clean, queue)  # the slot was released

    assert (result.status, result.tasks_failed, result.tasks_succeeded) == ("failed", 3, 0)
    assert took < BOUND
    assert held == 0  # its slot was released when it ended
    every = await _tasks(db_pool, poison.run_id)
    assert [r["id"] for r in every] == [
        task_workflow_id(poison.run_id, t, i) for i, t in enumerate(["noop", "record", "record"])
    ]
    for row in every:
        assert row["status"] == "failed", dict(row)
        assert row["idempotency_key"] is None  # a claim that failed holds no key
        assert row["last_error"].startswith("UntranslatableCharacterError: "), row["last_error"]
        assert "SQLSTATE 22P05" in row["last_error"]
    assert ran_poisoned == []  # no handler ran
    for wf_id in [poison.workflow_id, *(r["id"] for r in every)]:
        await _replays(temporal, wf_id)
    run_row = await _run_row(db_pool, poison.run_id)
    assert (run_row["status"], run_row["finished_at"] is not None) == ("failed", True)
    assert after.status == "succeeded"
    assert len(ran) == 2  # the clean run's two record tasks
    assert await db_pool.fetchval("SELECT count(*) FROM flow_waiters") == 0
    assert await db_pool.fetchval("SELECT count(*) FROM flow_slot_keys") == 0
    assert await db_pool.fetchval("SELECT count(*) FROM permit_slots WHERE ended_at IS NULL") == 0


async def test_a_long_idempotency_key_is_stored_as_its_digest_and_still_dedupes(
    cfg, temporal, db_pool, worker
):
    """A ~3,000-character random key (over the btree row limit) is stored as
    ``sha256:<hex>``: the task runs, and a second run rendering the same key is its
    duplicate; a short key is stored as it is."""
    blob = _random_text(3000)
    activity_id = await insert_activity(
        db_pool,
        [
            {"type": "noop", "idempotency_key": "{data.blob}"},
            {"type": "noop", "idempotency_key": "short-{data.id}"},
        ],
    )
    tag = uuid.uuid4().hex
    first = event_run(activity_id, data={"blob": blob, "id": tag})
    second = event_run(activity_id, data={"blob": blob, "id": tag})
    queue = cfg.temporal.task_queue
    async with worker():
        r1 = await _result(temporal, first, queue)
        r2 = await _result(temporal, second, queue)

    assert (r1.status, r1.tasks_succeeded, r1.tasks_duplicate) == ("succeeded", 2, 0)
    assert (r2.status, r2.tasks_succeeded, r2.tasks_duplicate) == ("succeeded", 0, 2)
    digest = "sha256:" + hashlib.sha256(blob.encode()).hexdigest()
    every = await _tasks(db_pool, first.run_id)
    assert [r["idempotency_key"] for r in every] == [digest, f"short-{tag}"]
    dupes = await _tasks(db_pool, second.run_id)
    assert [(r["status"], r["duplicate_of"]) for r in dupes] == [
        ("duplicate", every[0]["id"]),
        ("duplicate", every[1]["id"]),
    ]


def _refusing_flow_acquire(deps: PartDeps) -> WorkerPart:
    """The permits part, with a slot's admission round that PostgreSQL refuses (a CHECK
    it breaks, 23514): what a queued run meets when its round cannot be written."""

    @activity.defn(name="flow_acquire")
    async def flow_acquire(inp: FlowAcquireInput) -> FlowAcquired:
        raise asyncpg.exceptions.CheckViolationError('violates check constraint "test"')

    flow = FlowActivities(deps.pool)
    acts: list[Callable[..., Any]] = [
        *PermitActivities(deps.pool).all(),
        flow_acquire,
        flow.flow_release,
    ]
    return WorkerPart("permits", activities=acts)


async def test_a_queued_run_whose_admission_round_is_refused_ends_failed(
    cfg, temporal, db_pool, worker
):
    """Limit 1: run A holds the slot, run B queues and its own round (``flow_acquire``,
    a step of the run itself) is refused. B leaves the queue and ends failed, its row
    finished; A runs on and succeeds."""
    entered, gate = asyncio.Event(), asyncio.Event()

    async def hold(ctx: TaskContext) -> None:
        entered.set()
        await gate.wait()

    activity_id = await _slot_activity(db_pool, [{"type": "hold"}])
    first = event_run(activity_id, data={"k": "a"})
    second = event_run(activity_id, data={"k": "a"})
    queue = cfg.temporal.task_queue
    registry = registry_with(hold=hold)
    async with worker(registry=registry, parts=(core_part, _refusing_flow_acquire)):
        a = await start_run(temporal, first, queue)
        await _within(a, entered.wait())
        b = await start_run(temporal, second, queue)
        with pytest.raises(WorkflowFailureError) as failed:
            await _within(b, b.result())
        waiting = await db_pool.fetchval("SELECT count(*) FROM flow_waiters")
        gate.set()
        done = await _within(a, a.result())

    cause = failed.value.cause
    assert getattr(cause, "type", None) == "RunFailed", cause
    assert "CheckViolationError: SQLSTATE 23514" in str(cause)
    row = await _run_row(db_pool, second.run_id)
    assert (row["status"], row["finished_at"] is not None) == ("failed", True)
    assert waiting == 0  # B left the queue when it failed
    assert await _tasks(db_pool, second.run_id) == []
    assert done.status == "succeeded"
    await _replays(temporal, second.workflow_id)


async def test_a_fix_that_cannot_be_stored_is_refused_and_the_task_stays_paused(
    cfg, temporal, db_pool, worker
):
    """A paused task's ``fix`` whose patch PostgreSQL cannot store (a NUL: 22P05 in the
    audit row) fails that update with the reason; the task stays pending_fix, so a
    later action (here ``skip``) is taken, and the run ends."""
    activity_id = await insert_activity(
        db_pool, [{"type": "fail", "config": {"message": "boom"}, "on_failure": "pause"}]
    )
    run = event_run(activity_id)
    task_id = task_workflow_id(run.run_id, "fail", 0)
    async with worker():
        handle = await start_run(temporal, run, cfg.temporal.task_queue)
        task = temporal.get_workflow_handle(task_id)

        async def paused() -> bool:
            status = await db_pool.fetchval(
                "SELECT status FROM task_instances WHERE id = $1", task_id
            )
            return bool(status == "pending_fix")

        await eventually(paused, BOUND, "the task to pause")
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await _within(
                handle, task.execute_update("fix", FixRequest("eve", {"note": "a\u0000b"}))
            )
        state = await task.query("fix_state", result_type=FixState)
        await _within(handle, task.execute_update("skip", FixRequest("eve", note="no fix")))
        result = await _within(handle, handle.result())

    assert "UntranslatableCharacterError: SQLSTATE 22P05" in str(refused.value.cause)
    assert (state.status, state.fixes) == ("pending_fix", [])
    assert result.status == "succeeded" and result.tasks_skipped == 1
    fixes = await db_pool.fetch("SELECT seq, action FROM task_fixes WHERE task_id = $1", task_id)
    assert [tuple(f) for f in fixes] == [(1, "skip")]
    await _replays(temporal, task_id)
