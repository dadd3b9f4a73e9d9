"""One replay as asked for, and running it: shared by ``ingest replay`` and ``POST /api/replay``.

:class:`ReplayRequest` holds what the command takes as flags (the ops API as fields);
:func:`run_request` runs it with :class:`replay.dlq.DlqRedriver` (``dlq``) or
:class:`replay.topic.Replayer` and returns the report. Each caller checks its own
input first (flag or field names in its messages).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import asyncpg
from temporalio.client import Client

from ingress.records import restamper
from ingress.settings import load_ingress_settings
from pipeline.settings import Settings
from replay.dlq import DLQ_GROUP, DlqRedriver
from replay.session import Progress, ReplayReport
from replay.topic import Replayer, ReplayRange
from router.settings import RouterSettings


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
    group: str = DLQ_GROUP  # with dlq: the consumer group that keeps the progress


async def run_request(
    settings: Settings,
    rcfg: RouterSettings,
    req: ReplayRequest,
    *,
    client: Client,
    pool: asyncpg.Pool,
    progress: Progress | None = None,
    stopping: Callable[[], bool] = lambda: False,
) -> ReplayReport:
    """Run ``req`` to the end (or until ``stopping()``). Raises ReplayError."""
    if req.dlq:
        return await DlqRedriver(
            settings,
            rcfg,
            client=client,
            pool=pool,
            restamp=restamper(settings.kafka, load_ingress_settings),
            group=req.group,
            reason=req.reason,
            dry_run=req.dry_run,
            progress=progress,
            stopping=stopping,
        ).run()
    rng = ReplayRange(
        topic=req.topic or settings.kafka.events_topic,
        from_offset=req.from_offset,
        from_time=req.from_time,
        to_time=req.to_time,
        partitions=req.partitions,
    )
    return await Replayer(
        settings,
        rcfg,
        client=client,
        pool=pool,
        dry_run=req.dry_run,
        progress=progress,
        stopping=stopping,
    ).run(rng)
