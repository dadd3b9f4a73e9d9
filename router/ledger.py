"""The durable dedupe ledger (``routed_triggers``).

* :meth:`Ledger.seen` looks a whole batch of workflow ids up in one query; the
  router skips those it finds (``layer="ledger"``) without asking Temporal.
* :meth:`Ledger.record` writes, in one statement, the ids Temporal has
  acknowledged (started or already-started). The router calls it *before*
  committing the offsets of those messages, so a committed offset always has
  its ledger row.
* :meth:`Ledger.prune` deletes rows older than the retention (0 = keep forever).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from pipeline import db


@dataclass(frozen=True)
class LedgerEntry:
    workflow_id: str
    activity_id: str
    event_id: str | None = None
    scheduled_for: datetime | None = None
    source_topic: str | None = None
    source_partition: int | None = None
    source_offset: int | None = None


class Ledger:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def seen(self, workflow_ids: list[str]) -> set[str]:
        if not workflow_ids:
            return set()
        rows = await self.pool.fetch(
            "SELECT workflow_id FROM routed_triggers WHERE workflow_id = ANY($1::text[])",
            workflow_ids,
        )
        return {r["workflow_id"] for r in rows}

    async def record(self, entries: list[LedgerEntry]) -> None:
        if not entries:
            return
        cols = list(
            zip(
                *(
                    (
                        e.workflow_id,
                        e.activity_id,
                        e.event_id,
                        e.scheduled_for,
                        e.source_topic,
                        e.source_partition,
                        e.source_offset,
                    )
                    for e in entries
                ),
                strict=True,
            )
        )
        await self.pool.execute(
            """
            INSERT INTO routed_triggers (workflow_id, activity_id, event_id, scheduled_for,
                                         source_topic, source_partition, source_offset)
            SELECT * FROM unnest($1::text[], $2::uuid[], $3::text[], $4::timestamptz[],
                                 $5::text[], $6::int[], $7::bigint[])
            ON CONFLICT (workflow_id) DO NOTHING
            """,
            *[list(c) for c in cols],
        )

    async def prune(self, retention_days: float) -> int:
        return await db.prune_older_than(
            self.pool,
            "DELETE FROM routed_triggers WHERE first_routed_at < now() - make_interval(secs => $1)",
            retention_days,
        )
