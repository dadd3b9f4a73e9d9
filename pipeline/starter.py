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

import logging
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from datetime import timedelta

from temporalio.client import Client
from temporalio.common import Priority, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from pipeline import metrics, tracing
from pipeline.retry import BACKOFF_INITIAL, BACKOFF_MAX, backoff, jittered, until_done
from schemas.errors import IngestError
from schemas.flow.fairness import Fairness
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
        # The client's credentials, not the message: an expired or revoked API key (JWT),
        # or a namespace permission taken away, refuses every start alike. Retried and
        # counted (IngestStartErrors) like an outage, never dead-lettered: a refusal here
        # sent every event to the DLQ (tests/integration/secure_temporal/).
        RPCStatusCode.UNAUTHENTICATED,
        RPCStatusCode.PERMISSION_DENIED,
    }
)

# The real server answers NOT_FOUND with this detail for a namespace that exists while
# its namespace registry cannot read the database (PostgreSQL down under the server:
# tests/faults/test_temporal_server_faults.py). The namespace was there when the process
# started (pipeline.clients.temporal_client checks), so this is an outage, not a refusal.
NAMESPACE_NOT_FOUND = "temporal.api.errordetails.v1.NamespaceNotFoundFailure"
# The error label pipeline_start_errors_total counts it under.
E_NAMESPACE_NOT_FOUND = "NAMESPACE_NOT_FOUND"


def outage(exc: RPCError) -> str | None:
    """The error label of a start failure that retrying can fix, or None for a refusal."""
    if exc.status in RETRIABLE:
        return exc.status.name
    if exc.status == RPCStatusCode.NOT_FOUND and any(
        d.type_url.endswith(NAMESPACE_NOT_FOUND) for d in exc.grpc_status.details
    ):
        return E_NAMESPACE_NOT_FOUND
    return None


# Every error label pipeline_start_errors_total may carry.
START_ERROR_LABELS = (*sorted(s.name for s in RETRIABLE), E_NAMESPACE_NOT_FOUND)

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


def start_priority(priority: int | None, fairness: Fairness | None) -> Priority:
    """The start's ``Priority``: the task priority (1..5) and the fairness key and weight;
    ``Priority.default`` (nothing set) when neither is given."""
    if priority is None and fairness is None:
        return Priority.default
    return Priority(
        priority_key=priority,
        fairness_key=fairness.key if fairness is not None else None,
        fairness_weight=fairness.weight if fairness is not None else None,
    )


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

    async def start(
        self,
        run: RunActivityInput,
        *,
        start_delay: timedelta | None = None,
        priority: int | None = None,
        fairness: Fairness | None = None,
    ) -> str:
        """``start_delay``: a durable delayed start (the id is reserved at once).

        ``priority``: Temporal's task priority of the run (1 first .. 5 last; None: the
        server's default, 3), e.g. from ``schemas.flow.concurrency.priority_of``. It orders
        the run's workflow tasks while they queue in matching (docs/flow-control.md says
        which servers honour it); the order of runs waiting for a concurrency slot is the
        wait queue's, recorded in the run itself.

        ``fairness``: Temporal's fairness key and weight (flow.fairness), in the same
        ``Priority``; the run's task children and activities inherit it from the run
        (docs/flow-control.md). Without priority and fairness the start sends what it
        always sent, ``Priority.default``."""
        prio = start_priority(priority, fairness)

        async def once() -> str:
            try:
                await self.client.start_workflow(
                    RUN_ACTIVITY_WORKFLOW,
                    run,
                    id=run.workflow_id,
                    task_queue=self.task_queue,
                    id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                    start_delay=start_delay,
                    priority=prio,
                    # tracing on: the server's own spans join the event's trace
                    rpc_metadata=tracing.grpc_metadata(),
                )
            except WorkflowAlreadyStartedError:
                metrics.DUPLICATES_SUPPRESSED.labels(
                    component=self.component,
                    trigger=run.trigger_kind,
                    layer=metrics.LAYER_TEMPORAL,
                ).inc()
                log.debug("already started: %s", run.workflow_id)
                return DUPLICATE
            except RPCError as exc:
                if not self.retry_outages:
                    raise
                if (error := outage(exc)) is None:
                    raise StartRejected(f"{exc.status.name}: {exc.message}") from None
                metrics.START_ERRORS.labels(component=self.component, error=error).inc()
                raise  # an outage: until_done waits it out
            metrics.WORKFLOWS_STARTED.labels(trigger=run.trigger_kind).inc()
            return STARTED

        return await until_done(
            "start of a run",  # /readyz: 503 while it fails
            once,
            retriable=lambda exc: self.retry_outages and isinstance(exc, RPCError),
            stopping=self.stopping,
            delays=jittered(backoff(self.backoff_initial, self.backoff_max)),
            subject=f"start of {run.workflow_id}",
        )
