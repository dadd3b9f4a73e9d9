"""The cron dispatcher as a worker part (see ``workers.parts``)."""

from __future__ import annotations

from scheduler.dispatcher import CronActivities, CronFireWorkflow
from workers.parts import PartDeps, WorkerPart


def cron_part(deps: PartDeps) -> WorkerPart:
    """``CronFireWorkflow``: starts the contract-id run of each schedule fire."""
    acts = CronActivities(deps.client, deps.pool, deps.settings.temporal.task_queue)
    return WorkerPart("cron", (CronFireWorkflow,), acts.all())
