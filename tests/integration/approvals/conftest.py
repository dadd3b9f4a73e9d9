"""Approval tests: the production worker wiring (core + approvals parts) in-process,
an activity whose first task is an approval, and helpers to wait on its state.

SLAs are seconds long. Times compared are workflow times (the server's clock) from
the audit trail, so assertions do not depend on how fast this machine is, except
where a test says what it needs ("decide before the next reminder is due").
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any

import asyncpg
import orjson
import pytest
from temporalio.client import Client, WorkflowHandle

from pipeline.settings import Settings
from schemas.approval_io import ApprovalDecision, ApprovalState, ApprovalUpdateResult
from schemas.ids import task_workflow_id
from schemas.workflow_io import RunActivityInput
from tests import helpers
from tests.integration.workers.conftest import event_run, start_run, worker_factory
from workers.approvals.part import approval_part
from workers.parts import core_part
from workers.workflows import TaskInstanceWorkflow


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
    run = event_run(await helpers.seed_activity(pool, "test.event", tasks=tasks))
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


async def notices(bootstrap: str, topic: str, kind: str) -> list[dict[str, Any]]:
    """The approval notices of ``kind`` on ``topic`` (bodies), by due time."""
    msgs = await helpers.read_all(bootstrap, topic)
    bodies = [orjson.loads(m.value) for m in msgs if dict(m.headers).get("notice")]
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
    """``async with approval_worker(settings=..., client=...)``: the core and approvals
    parts in-process (the production wiring of approval tasks), emitting to the test's
    topic."""

    def run(settings: Settings | None = None, client: Client | None = None) -> Any:
        factory = worker_factory(cfg, client or temporal, db_pool)
        return factory(settings=settings, parts=(core_part, approval_part), emit_topic=topics.out)

    return run
