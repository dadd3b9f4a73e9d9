"""Approval tests: the production worker wiring (core + approvals parts) in-process,
an activity whose first task is an approval, and helpers to wait on its state.

Temporal here is a PRIVATE dev server (in memory, free port, no UI), started once
per session by the ``private_temporal`` fixture through the stack's own service
(``tests.support.temporal.private_server``: ``devstack.temporal.Temporal`` with
``StackSettings.temporal_dynamic_config``), and the ``temporal`` client fixture is
overridden to point at it:

* its ``limit.historyCount.suggestContinueAsNew`` is lowered to ``SUGGEST_AT``
  events (and ``limit.historySize.suggestContinueAsNew`` to ``SUGGEST_BYTES``), so
  approvals continue as new within the tests, in every scenario;
* timers fire on time even when the shared server is busy with other suites.

SLAs are seconds long. Times compared are workflow times (the server's clock, the
same machine) from the audit trail; where a test needs the machine to keep up
("decide before the next reminder is due") it says so and checks it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import asyncpg
import orjson
import pytest
from temporalio.client import Client, WorkflowHandle

from pipeline.clients import temporal_client
from pipeline.kafka import header as kafka_header
from pipeline.settings import Settings, TemporalSettings
from schemas.approval_io import ApprovalDecision, ApprovalState, ApprovalUpdateResult
from schemas.ids import task_workflow_id
from schemas.workflow_io import RunActivityInput
from tests.support import db
from tests.support.runs import event_run, start_run, worker_factory
from tests.support.temporal import private_server
from workers.approvals.part import approval_part
from workers.parts import core_part
from workers.task_workflow import TaskInstanceWorkflow

SUGGEST_AT = 40  # history events; one request_changes + resubmit round adds ~15
# History bytes (the server's default is 4 MB): lowered too, so a history that grows in
# bytes (a continued run's input carries the audit trail) is suggested in the tests too.
SUGGEST_BYTES = 256 * 1024


@pytest.fixture(scope="session")
def private_temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The address of a private, in-memory dev server (stopped at the end)."""
    dynamic = (
        f"limit.historyCount.suggestContinueAsNew={SUGGEST_AT}",
        f"limit.historySize.suggestContinueAsNew={SUGGEST_BYTES}",
    )
    with private_server(tmp_path_factory.mktemp("temporal"), dynamic) as address:
        yield address


@pytest.fixture(scope="session")
async def temporal(private_temporal: str) -> Client:
    """Overrides the shared stack's client for the approval tests."""
    # the production client; `default` named, as the session sets TEMPORAL_NAMESPACE
    return await temporal_client(TemporalSettings(address=private_temporal, namespace="default"))


def approval_task(**config: Any) -> dict[str, Any]:
    """An approval task definition (approver alice unless ``approvers`` is given)."""
    return {
        "type": "approval",
        "payload": {"amount": 1200},
        "config": {"approvers": ["alice"], **config},
    }


async def start_approval_run(
    client: Client,
    pool: asyncpg.Pool,
    task_queue: str,
    approval: dict[str, Any],
    then: list[dict[str, Any]] | None = None,
) -> tuple[WorkflowHandle, WorkflowHandle, RunActivityInput]:
    """Seed an activity [approval, *then] (default then: one emit), start its run.

    Returns (run handle, approval task handle, run input).
    """
    tasks = [approval, *(then if then is not None else [{"type": "emit", "payload": {"k": 1}}])]
    run = event_run(await db.seed_activity(pool, "test.event", tasks=tasks))
    handle = await start_run(client, run, task_queue)
    task = client.get_workflow_handle(task_workflow_id(run.run_id, "approval", 0))
    return handle, task, run


async def state(task: WorkflowHandle) -> ApprovalState:
    got = await task.query(TaskInstanceWorkflow.approval)
    assert got is not None
    return got


async def wait_state(
    task: WorkflowHandle, pred: Callable[[ApprovalState], bool], timeout: float = 60
) -> ApprovalState:
    """Poll the ``approval`` query until ``pred`` holds (the task may not exist yet)."""
    from temporalio.service import RPCError

    async with asyncio.timeout(timeout):
        while True:
            try:
                s = await task.query(TaskInstanceWorkflow.approval)
                if s is not None and pred(s):
                    return s
            except RPCError:  # not started yet
                pass
            await asyncio.sleep(0.1)


async def quiet(task: WorkflowHandle, timeout: float = 60) -> None:
    """Wait until the task has no activity in flight and its last workflow task completed
    (the ``approval.requested`` notice is sent without holding up the wait)."""
    from temporalio.api.enums.v1 import EventType

    async with asyncio.timeout(timeout):
        while True:
            desc = await task.describe()
            if not desc.raw_description.pending_activities:
                events = (await task.fetch_history()).events
                if events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
                    return
            await asyncio.sleep(0.2)


async def replays(*handles: WorkflowHandle) -> None:
    """Each handle's history (its last run) replays deterministically with today's code."""
    from temporalio.worker import Replayer

    from workers.run_workflow import RunActivityWorkflow

    replayer = Replayer(workflows=[RunActivityWorkflow, TaskInstanceWorkflow])
    for handle in handles:
        result = await replayer.replay_workflow(await handle.fetch_history())
        assert result.replay_failure is None, result.replay_failure


async def decide(
    task: WorkflowHandle, by: str, decision: str, reason: str | None = None
) -> ApprovalUpdateResult:
    return await task.execute_update(
        TaskInstanceWorkflow.decide, ApprovalDecision(by, decision, reason)
    )


def at(value: str) -> datetime:
    return datetime.fromisoformat(value)


async def sleep_until(when: datetime) -> None:
    """Sleep until a workflow-time instant (same machine: the server's clock is ours)."""
    from datetime import UTC

    await asyncio.sleep(max(0.0, (when - datetime.now(UTC)).total_seconds()))


async def notices(cfg: Settings, pool: asyncpg.Pool, topic: str, kind: str) -> list[dict[str, Any]]:
    """The approval notices of ``kind`` on ``topic`` (bodies), by due time, as a
    read_committed consumer sees them once a relay (``ingest relay``'s code, in process,
    its own instance) has published the test's outbox. Each notice once, by its
    ``notice_id``; call it once per test (a second relay instance starts from no
    progress and publishes the outbox again)."""
    from tests.support.outbox import read_committed, running_relay

    rows = await pool.fetchval("SELECT count(*) FROM outbox WHERE topic = $1", topic)
    async with running_relay(cfg):
        msgs = await read_committed(cfg.kafka.bootstrap_servers, topic, rows)
    sent = [m for m in msgs if kafka_header(m.headers, "notice")]
    ids = [kafka_header(m.headers, "notice_id") for m in sent]
    assert None not in ids and len(set(ids)) == len(ids), f"a notice twice: {ids}"
    bodies = [orjson.loads(m.value) for m in sent]
    return sorted((b for b in bodies if b["kind"] == kind), key=lambda b: b.get("due") or "")


async def events(pool: asyncpg.Pool, task_id: str) -> list[dict[str, Any]]:
    rows = await pool.fetch(
        "SELECT * FROM approval_events WHERE task_id = $1 ORDER BY seq", task_id
    )
    return [dict(r) for r in rows]


@pytest.fixture
def approval_worker(
    cfg: Settings, temporal: Client, db_pool: asyncpg.Pool, topics: Any
) -> Callable[..., Any]:
    """``async with approval_worker(settings=...)``: the core and approvals
    parts in-process (the production wiring of approval tasks), emitting to the test's
    topic."""

    def run(settings: Settings | None = None) -> Any:
        factory = worker_factory(cfg, temporal, db_pool)
        return factory(settings=settings, parts=(core_part, approval_part), emit_topic=topics.out)

    return run
