"""Starting ``RunActivityWorkflow`` with the contract id, absorbing duplicates, retrying outages.

The one starter of runs: the router and replay start event runs with it, the
cron dispatcher cron runs (both build the input with
``RunActivityInput.for_event`` / ``.for_cron``). Every start uses
REJECT_DUPLICATE. The outcome of one start is ``started``, ``duplicate`` (Temporal answered
``WorkflowAlreadyStartedError``: success-already-done) or a
:class:`StartRejected` for a permanent refusal (e.g. an id Temporal finds
invalid), which the router dead-letters. Retriable failures (Temporal
unavailable, overloaded, timing out) are retried with capped exponential
backoff until they succeed or shutdown is requested; the caller's offset is
not marked done meanwhile, so nothing is skipped. With ``retry_outages=False``
(the cron dispatcher, itself a Temporal activity that Temporal retries) every
``RPCError`` is raised as it came.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass

from temporalio.client import Client
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from pipeline import metrics
from pipeline.retry import BACKOFF_INITIAL, BACKOFF_MAX, backoff
from schemas.errors import IngestError
from schemas.workflow_io import RUN_ACTIVITY_WORKFLOW, RunActivityInput

log = logging.getLogger(__name__)

RETRIABLE = frozenset(
    {
        RPCStatusCode.UNAVAILABLE,
        RPCStatusCode.RESOURCE_EXHAUSTED,
        RPCStatusCode.DEADLINE_EXCEEDED,
        RPCStatusCode.ABORTED,
        RPCStatusCode.INTERNAL,
        RPCStatusCode.UNKNOWN,
        RPCStatusCode.CANCELLED,
    }
)

STARTED = "started"
DUPLICATE = "duplicate"
# The DLQ reason of a start Temporal refused for good.
R_START_REJECTED = "start_rejected"


class StartRejected(IngestError):
    """Temporal refused the start for good; the message goes to the DLQ."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.reason = R_START_REJECTED
        self.detail = detail


class ShutdownRequested(IngestError):
    """Stopped retrying because the process is shutting down; the offset stays uncommitted."""


@dataclass
class Starter:
    client: Client
    task_queue: str
    _: KW_ONLY
    component: str = "router"
    backoff_initial: float = BACKOFF_INITIAL
    backoff_max: float = BACKOFF_MAX
    stopping: Callable[[], bool] = lambda: False
    retry_outages: bool = True

    async def start(self, run: RunActivityInput) -> str:
        delays = backoff(self.backoff_initial, self.backoff_max)
        while True:
            try:
                await self.client.start_workflow(
                    RUN_ACTIVITY_WORKFLOW,
                    run,
                    id=run.workflow_id,
                    task_queue=self.task_queue,
                    id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                )
                metrics.WORKFLOWS_STARTED.labels(trigger=run.trigger_kind).inc()
                return STARTED
            except WorkflowAlreadyStartedError:
                metrics.DUPLICATES_SUPPRESSED.labels(
                    component=self.component, trigger=run.trigger_kind, layer=metrics.LAYER_TEMPORAL
                ).inc()
                log.debug("already started: %s", run.workflow_id)
                return DUPLICATE
            except RPCError as exc:
                if not self.retry_outages:
                    raise
                if exc.status not in RETRIABLE:
                    raise StartRejected(f"{exc.status.name}: {exc.message}") from None
                metrics.START_ERRORS.labels(component=self.component, error=exc.status.name).inc()
                if self.stopping():
                    raise ShutdownRequested(run.workflow_id) from None
                delay = next(delays)
                log.warning(
                    "start of %s failed (%s), retrying in %.1fs",
                    run.workflow_id,
                    exc.status.name,
                    delay,
                )
                await asyncio.sleep(delay * (0.5 + random.random()))
