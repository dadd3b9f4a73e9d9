"""Helpers of the flow tests: when Temporal actually scheduled a run's first task."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from temporalio.api.enums.v1 import EventType

from schemas import ids
from tests.support import db, kafka


async def first_task_scheduled(client: Any, wid: str) -> datetime | None:
    """The time of the run's first WorkflowTaskScheduled event (after any start_delay), or
    None while its start is still delayed. No worker is needed: Temporal writes it."""
    async for e in client.get_workflow_handle(wid).fetch_history_events():
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
            return e.event_time.ToDatetime(tzinfo=UTC)
    return None


async def produce(cfg: Any, etype: str, n: int, **data: Any) -> list[str]:
    """``n`` events of ``etype`` on the events topic, in one burst; their event ids."""
    tag = uuid.uuid4().hex[:8]
    evs = [f"f-{tag}-{i}" for i in range(n)]
    await kafka.produce(
        cfg.kafka.bootstrap_servers,
        cfg.kafka.events_topic,
        [(e.encode(), db.event(etype, e, n=i, **data), []) for i, e in enumerate(evs)],
    )
    return evs


def wids(aid: str, evs: list[str]) -> list[str]:
    return [ids.event_workflow_id(aid, e) for e in evs]
