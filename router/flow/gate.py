"""The flow gate: per run, start now, start after a delay, or skip (with a reason).

:class:`Routing` asks :meth:`FlowGate.decide` before each start. An activity whose
flow declares none of the gate's controls (stage ``gate`` in
:mod:`schemas.flow.controls`: ``singleton``, ``rate_limit``, ``throttle``) starts at
once without a database call. Otherwise one ``flow_decide`` call
(:mod:`router.flow.store`) decides and records the decision under the run's workflow
id; a redelivered or replayed trigger gets the recorded decision back (the same start
time, the same skip) and takes no new slot.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio.client import Client

from pipeline import metrics
from router.flow import metrics as flow_metrics
from router.flow import singleton
from router.flow.keys import FlowKeys
from router.flow.store import O_CHECK, O_SKIP, Checked, Decided, FlowStore
from schemas.flow.controls import SKIP_REASONS, Stage, declared
from schemas.workflow_io import RunActivityInput

# A singleton holder can change between two looks; give up looking (and retry the
# message through the router's retry loop) after this many.
_MAX_CHECKS = 5


@dataclass(frozen=True)
class Decision:
    """What to do with one run. ``skip``: its reason; ``start_delay``: a throttled start."""

    skip: str | None = None
    start_delay: timedelta | None = None


START = Decision()


class FlowGate:
    def __init__(self, store: FlowStore, client: Client) -> None:
        self.store = store
        self.client = client
        self._zeroed: set[str] = set()

    async def decide(self, run: RunActivityInput, fk: FlowKeys | None) -> Decision:
        if fk is None or not declared(fk.flow, Stage.GATE):
            return START
        self._start_at_zero(run.activity_id, fk)
        d = await self._decide(run, fk)
        if d.outcome == O_SKIP:
            assert d.reason is not None
            if d.fresh:
                flow_metrics.FLOW_RUNS_SKIPPED.labels(
                    activity=run.activity_id, reason=d.reason
                ).inc()
            return Decision(skip=d.reason)
        if d.cancelled is not None:
            # Again on a redelivery (the first attempt may have died before it): idempotent.
            await singleton.cancel(self.client, d.cancelled, run.workflow_id)
        if d.start_at is None:
            return START
        delay = max(0.0, (d.start_at - d.now).total_seconds())
        if d.fresh:
            flow_metrics.FLOW_THROTTLE_DELAY.labels(activity=run.activity_id).observe(delay)
            if delay > 0:
                flow_metrics.FLOW_RUNS_DELAYED.labels(activity=run.activity_id).inc()
        return Decision(start_delay=timedelta(seconds=delay)) if delay > 0 else START

    async def _decide(self, run: RunActivityInput, fk: FlowKeys) -> Decided:
        checked = None
        for _ in range(_MAX_CHECKS):
            d = await self.store.decide(run, fk, checked)
            if d.outcome != O_CHECK:
                return d
            assert d.holder is not None and d.holder_since is not None
            running = await singleton.holder_running(self.client, d.holder, d.holder_since, d.now)
            checked = Checked(d.holder, running)
        raise ConnectionError(f"singleton holder of {run.workflow_id}'s key kept changing")

    def _start_at_zero(self, activity_id: str, fk: FlowKeys) -> None:
        if activity_id in self._zeroed:
            return
        self._zeroed.add(activity_id)
        metrics.start_at_zero(
            flow_metrics.FLOW_RUNS_SKIPPED, activity=[activity_id], reason=SKIP_REASONS
        )
        metrics.start_at_zero(flow_metrics.FLOW_RUNS_DELAYED, activity=[activity_id])
        metrics.start_at_zero(flow_metrics.FLOW_THROTTLE_DELAY, activity=[activity_id])
        if fk.flow.cancel_on:  # router/flow/cancel.py counts the runs it cancels
            metrics.start_at_zero(flow_metrics.FLOW_RUNS_CANCELLED, activity=[activity_id])
