"""The activities of approval tasks: notices (through the outbox), and the audit trail.

* ``approval_notice`` (a regular activity, retried until it succeeds or is no longer
  wanted) writes a request, reminder or escalation to the outbox, for the emit topic,
  keyed by the task id, with the ``emit`` handler's headers plus ``notice`` and
  ``notice_id`` (the dedupe id: several notices share a task id). ``ingest relay``
  publishes it, exactly once for a read_committed consumer, as it does an ``emit``.
* ``record_approval`` (a local activity, like the run bookkeeping) writes audit
  entries and the summary row, counts the metrics of the entries that were new
  (so a retry or a replay counts nothing twice), and refreshes the waiting gauge.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import asyncpg
import orjson
from temporalio import activity

from pipeline.metrics import start_at_zero
from schemas.approval_io import (
    APPROVAL_TASK_TYPE,
    DECISIONS,
    ApprovalNoticeInput,
    AuditEntry,
    RecordApprovalInput,
)
from schemas.ids import approval_notice_id
from workers.approvals import store
from workers.approvals.metrics import (
    APPROVAL_DECISIONS,
    APPROVAL_WAIT,
    APPROVALS_WAITING,
    SLA_ESCALATIONS,
)
from workers.handlers import Resources
from workers.store import OutboxMessage, put_outbox

log = logging.getLogger(__name__)

# Audit kinds that end a wait, and the decisions_total outcome of each.
_OUTCOME_OF_KIND = {"auto_rejected": "auto_reject", "expired": "resubmission_timeout"}


def start_metrics_at_zero() -> None:
    """Every outcome the approvals part counts, at 0 from the start (see pipeline.metrics)."""
    start_at_zero(APPROVAL_DECISIONS, outcome=[*DECISIONS, *_OUTCOME_OF_KIND.values()])


def count(entry: AuditEntry) -> None:
    """The metrics of one audit entry written for the first time."""
    if entry.kind == "escalated":
        SLA_ESCALATIONS.inc()
    outcome = entry.decision if entry.kind == "decision" else _OUTCOME_OF_KIND.get(entry.kind)
    if outcome is not None:
        APPROVAL_DECISIONS.labels(outcome=outcome).inc()
    if entry.kind in ("decision", "auto_rejected") and entry.waited_seconds is not None:
        APPROVAL_WAIT.observe(entry.waited_seconds)


class ApprovalActivities:
    def __init__(self, pool: asyncpg.Pool, resources: Resources) -> None:
        self._pool = pool
        self._resources = resources

    def all(self) -> list[Callable[..., Any]]:
        return [self.notice, self.record]

    @activity.defn(name="approval_notice")
    async def notice(self, inp: ApprovalNoticeInput) -> None:
        """Write the notice to the outbox once; ``ingest relay`` publishes it (exactly once
        for read_committed consumers, as an ``emit``)."""
        body = orjson.dumps(
            {"kind": inp.kind, "task_id": inp.task_id, "run_id": inp.run_id,
             "activity_id": inp.activity_id, **inp.body},
            option=orjson.OPT_SORT_KEYS,
        )  # fmt: skip
        notice_id = approval_notice_id(inp.task_id, inp.kind, body)
        headers = (
            ("task_id", inp.task_id.encode()),
            ("run_id", inp.run_id.encode()),
            ("activity_id", inp.activity_id.encode()),
            ("task_type", APPROVAL_TASK_TYPE.encode()),
            ("notice", inp.kind.encode()),
            ("notice_id", notice_id.encode()),
        )
        topic = inp.topic or self._resources.emit_topic
        message = OutboxMessage(notice_id, topic, inp.task_id.encode(), headers, body)
        if not await put_outbox(self._pool, message):
            log.info("notice %s was already in the outbox (a retried attempt)", notice_id)

    @activity.defn(name="record_approval")
    async def record(self, inp: RecordApprovalInput) -> int:
        """Returns how many entries were new."""
        new = await store.record(self._pool, inp)
        for entry in new:
            count(entry)
        await self.refresh_gauge()
        return len(new)

    async def refresh_gauge(self) -> None:
        APPROVALS_WAITING.set(await store.count_waiting(self._pool))
