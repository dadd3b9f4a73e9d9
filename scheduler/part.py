"""The cron dispatcher as a worker part (see ``workers.parts``)."""

from __future__ import annotations

from typing import get_args

from pipeline import metrics
from scheduler.dispatcher import CronActivities, CronFireWorkflow
from scheduler.metrics import MISFIRES
from schemas.definitions import CronTrigger
from schemas.workflow_io import TRIGGER_CRON
from workers.parts import PartDeps, WorkerPart

# Every misfire policy an activity may declare (pipeline_misfires_total{policy}).
MISFIRE_POLICIES = get_args(CronTrigger.model_fields["misfire_policy"].annotation)


def start_metrics_at_zero() -> None:
    """Every series the dispatcher counts, at 0 from the start (see :mod:`pipeline.metrics`)."""
    metrics.start_at_zero(MISFIRES, policy=MISFIRE_POLICIES)
    metrics.start_at_zero(metrics.WORKFLOWS_STARTED, trigger=[TRIGGER_CRON])
    metrics.start_at_zero(
        metrics.DUPLICATES_SUPPRESSED,
        component=["scheduler"],
        trigger=[TRIGGER_CRON],
        layer=[metrics.LAYER_LEDGER, metrics.LAYER_TEMPORAL],
    )


def cron_part(deps: PartDeps) -> WorkerPart:
    """``CronFireWorkflow``: starts the contract-id run of each schedule fire."""
    start_metrics_at_zero()
    acts = CronActivities(deps.client, deps.pool, deps.settings.temporal.task_queue)
    return WorkerPart("cron", (CronFireWorkflow,), acts.all())
