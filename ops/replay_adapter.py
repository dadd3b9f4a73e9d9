"""The one place the ops service calls the replay code (``POST /api/replay``).

Kept to one small function, the ops side of the ``replay`` package. The report is the same
object ``ingest replay --json`` prints (``ReplayReport.as_dict()``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
from temporalio.client import Client

from ingress.records import restamper
from ingress.settings import load_ingress_settings
from pipeline.settings import Settings
from replay.dlq import DLQ_GROUP, DlqRedriver
from replay.session import ReplayError
from replay.topic import Replayer, ReplayRange
from router.settings import load_router_settings

__all__ = ["ReplayError", "ReplayRequest", "run_replay"]


@dataclass(frozen=True)
class ReplayRequest:
    """What ``ingest replay`` takes as flags; ``dlq`` re-drives the DLQ instead."""

    dry_run: bool = True
    dlq: bool = False
    reason: str | None = None
    topic: str | None = None
    from_offset: int | None = None
    from_time: datetime | None = None
    to_time: datetime | None = None
    partitions: tuple[int, ...] | None = None


async def run_replay(
    settings: Settings, client: Client, pool: asyncpg.Pool, req: ReplayRequest
) -> dict[str, Any]:
    """Run it to the end and return the ``--json`` report. Raises ReplayError."""
    rcfg = load_router_settings()
    if req.dlq:
        report = await DlqRedriver(
            settings, rcfg, client=client, pool=pool, group=DLQ_GROUP, reason=req.reason,
            dry_run=req.dry_run, restamp=restamper(settings.kafka, load_ingress_settings),
        ).run()  # fmt: skip
    else:
        rng = ReplayRange(
            topic=req.topic or settings.kafka.events_topic,
            from_offset=req.from_offset,
            from_time=req.from_time,
            to_time=req.to_time,
            partitions=req.partitions,
        )
        report = await Replayer(settings, rcfg, client=client, pool=pool,
                                dry_run=req.dry_run).run(rng)  # fmt: skip
    return report.as_dict()
