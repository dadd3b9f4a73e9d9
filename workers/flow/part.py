"""Flow control in the worker, as one worker part (see ``workers.parts``).

* Concurrency slots (``flow.concurrency``): the admit-and-acquire and release
  activities a run calls around its tasks (:mod:`workers.flow.slot`), and the
  slots-in-use, runs-waiting and oldest-wait gauges, refreshed from PostgreSQL.
* Ordered lines (``flow.ordered``): ``flow_order_turn``, the round of a run waiting
  for its turn (:mod:`workers.flow.order`), and the waiting and blocked-lines gauges.
* Debounce and batch windows: ``FlowWindowWorkflow`` and its ``close_window``
  activity. A window no run can take goes to the DLQ topic through the outbox
  (``ingest relay`` publishes it): :mod:`workers.flow.window_dead_letters`.
"""

from __future__ import annotations

import asyncpg

from workers.flow import order_store, slot_store
from workers.flow import window_dead_letters as dead_letters
from workers.flow.ended_metrics import ended_at_zero
from workers.flow.metrics import (
    FLOW_OLDEST_WAIT,
    FLOW_ORDER_BLOCKED,
    FLOW_ORDER_OLDEST_BLOCKED,
    FLOW_ORDER_WAITING,
    FLOW_RUNS_WAITING,
    FLOW_SLOTS_IN_USE,
)
from workers.flow.order_activities import OrderActivities
from workers.flow.slot_activities import STALE_SECONDS, FlowActivities
from workers.flow.window import FlowWindowWorkflow
from workers.flow.window_activities import FlowWindowActivities
from workers.parts import PartDeps, WorkerPart, gauge_refresher

WORKFLOW_MODULES = ("workers.flow.window",)


async def refresh_gauges(pool: asyncpg.Pool) -> None:
    """Per activity with flow.concurrency: slots in use, runs waiting, the oldest wait
    (every such activity, at 0 when idle; keys are left to ``ingest flow list``)."""
    for use in await slot_store.activity_use(pool, STALE_SECONDS):
        FLOW_SLOTS_IN_USE.labels(activity=use.activity_id).set(use.in_use)
        FLOW_RUNS_WAITING.labels(activity=use.activity_id).set(use.waiting)
        FLOW_OLDEST_WAIT.labels(activity=use.activity_id).set(use.oldest_wait_seconds)
    # flow.ordered: runs waiting for their turn, lines blocked by a failed head.
    for lines in await order_store.activity_lines(pool):
        FLOW_ORDER_WAITING.labels(activity=lines.activity_id).set(lines.waiting)
        FLOW_ORDER_BLOCKED.labels(activity=lines.activity_id).set(lines.blocked)
        FLOW_ORDER_OLDEST_BLOCKED.labels(activity=lines.activity_id).set(
            lines.oldest_blocked_seconds
        )
    # flow.timeouts, cancel_on, singleton: runs ended early, counted from 0 (alerted on).
    await ended_at_zero(pool)


def flow_part(deps: PartDeps) -> WorkerPart:
    """The slot and window activities, ``FlowWindowWorkflow`` (on the runs' task queue),
    and the concurrency gauges. Runs of an activity with a ``flow`` block need it."""

    dead_letters.start_metrics_at_zero()
    slots = FlowActivities(deps.pool, deps.client, deps.worker_settings.flow_slot_lease_seconds)
    windows = FlowWindowActivities(
        deps.pool,
        deps.client,
        deps.settings.temporal.task_queue,
        deps.settings.kafka.dlq_topic,
    )
    order = OrderActivities(deps.pool, deps.worker_settings.flow_slot_lease_seconds)
    return WorkerPart(
        "flow",
        (FlowWindowWorkflow,),
        [*slots.all(), *windows.all(), *order.all()],
        (gauge_refresher("flow", refresh_gauges, deps.pool),),
        passthrough=WORKFLOW_MODULES,
    )
