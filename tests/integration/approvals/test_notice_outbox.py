"""Approval notices go through the outbox (real PostgreSQL): a retried notice activity
writes nothing twice, and each distinct notice has its own dedupe id."""

from __future__ import annotations

import asyncpg
import orjson

from schemas.approval_io import ApprovalNoticeInput
from workers.approvals.activities import ApprovalActivities
from workers.handlers import Resources


def _reminder(n: int) -> ApprovalNoticeInput:
    body = {"to": ["alice"], "status": "waiting", "round": 1, "reminder": n}
    return ApprovalNoticeInput("task-n", "run-n", "act-n", "approval.reminder", body, "out-n")


async def test_a_retried_notice_is_written_once_and_each_notice_has_its_id(
    db_pool: asyncpg.Pool,
) -> None:
    acts = ApprovalActivities(db_pool, Resources(emit_topic="unused"))
    await acts.notice(_reminder(1))
    await acts.notice(_reminder(1))  # the attempt after a worker died before reporting
    await acts.notice(_reminder(2))  # the next reminder: another notice
    rows = await db_pool.fetch(
        "SELECT id, topic, key, headers::text AS headers, body FROM outbox ORDER BY txid, seq"
    )
    assert len(rows) == 2
    headers = [dict(orjson.loads(r["headers"])) for r in rows]
    assert [h["notice_id"] for h in headers] == [r["id"] for r in rows]
    assert rows[0]["id"] != rows[1]["id"]
    assert all(r["id"].startswith("task-n:approval.reminder:") for r in rows)
    assert {(r["topic"], bytes(r["key"])) for r in rows} == {("out-n", b"task-n")}
    assert [orjson.loads(r["body"])["reminder"] for r in rows] == [1, 2]
    assert {h["task_id"] for h in headers} == {"task-n"}
