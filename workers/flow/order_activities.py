"""The local activity of a run waiting for its turn in a flow.ordered line, and the
metrics it keeps (workflow code cannot count: a replay would count again).

``flow_order_turn`` asks whether the run's turn has come (``order_store.turn``); at its
turn, a run of an activity with ``flow.concurrency`` too makes its slot's first
admission round in the same step. Only then: a run that took a slot before its turn
would hold it while the runs ahead of it wait for it (with a limit of 1 per key, two
runs of one line would wait for each other for ever).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import asyncpg
from temporalio import activity

from schemas.flow.io import FlowAcquireInput, OrderTurn, OrderTurnInput
from workers.flow import order_store
from workers.flow.metrics import FLOW_ORDER_WAIT
from workers.flow.slot_activities import DEFAULT_LEASE_SECONDS, admission_round, granted
from workers.permits.semaphore import backoff_delay

log = logging.getLogger(__name__)

# A run not at its turn asks again after this, doubling up to the cap; the finish step
# of the run ahead wakes it by signal sooner (the timer covers a lost wake-up and the
# paths that end a run without waking: a cancel, a timeout, a release by hand).
BACKOFF_SECONDS = 2.0
MAX_BACKOFF_SECONDS = 30.0


class OrderActivities:
    def __init__(self, pool: asyncpg.Pool, lease_seconds: float = DEFAULT_LEASE_SECONDS) -> None:
        self._pool = pool
        self._lease = lease_seconds  # of the slot granted at the run's turn (concurrency)

    def all(self) -> list[Callable[..., Any]]:
        return [self.flow_order_turn]

    @activity.defn(name="flow_order_turn")
    async def flow_order_turn(self, inp: OrderTurnInput) -> OrderTurn:
        got = await order_store.turn(self._pool, inp.workflow_id)
        if got is not None and got.blocker is not None:
            retry = backoff_delay(inp.round_no, BACKOFF_SECONDS, MAX_BACKOFF_SECONDS)
            return OrderTurn(False, retry)
        if got is None:  # its place was pruned: nothing to wait for
            log.warning("run %s has no place in its line any more: it starts", inp.workflow_id)
        else:
            FLOW_ORDER_WAIT.labels(activity=got.place.activity_id).observe(got.waited_seconds)
        if inp.slot is None:
            return OrderTurn(True)
        first = FlowAcquireInput(inp.slot, inp.workflow_id, inp.holder_run_id)
        got_slot = await admission_round(self._pool, first, self._lease)
        return OrderTurn(True, grant=granted(first, got_slot))
