"""Every flow control, tagged with its stage: the one list a new control is added to.

A trigger meets the stages in this order (docs/architecture.md, "Adding a flow
control", lists the files each kind touches):

0. ``order`` (router, :mod:`router.flow.order`): the run takes its place in its key's
   line, in the order the router reads the partition, before anything else decides
   about it; the worker (:mod:`workers.flow.order`) starts its tasks at its turn.
1. ``window`` (router, :mod:`router.flow.windows`): the event goes into a debounce
   or batch window instead of starting a run; the window workflow
   (:mod:`workers.flow.window`) starts one run per closed window. A windowed
   activity's runs skip the gate.
2. ``gate`` (router, :mod:`router.flow.gate`): one ``flow_decide`` call in
   PostgreSQL (:mod:`router.flow.store`) decides, and records per workflow id: start
   now, start after a delay, or skip with the control's name as the reason. The
   controls apply in :data:`GATE_ORDER`, the order ``flow_decide`` takes them in
   (its latest definition, migration 0008): a new gate control is one more
   parameter group of that function, in a migration that redefines it.
3. ``start_option`` (router, :func:`pipeline.starter.Starter.start`): an option of
   the start itself (Temporal's task priority).
4. ``hold`` (worker, :mod:`workers.flow.slot`): a resource the run holds around its
   tasks (a concurrency slot per key, a PostgreSQL row).
5. ``run`` (worker, :mod:`workers.lifecycle`): how long the run may wait and last
   (timeouts); the run ends ``timed_out`` past them.

Every control may declare a ``key`` (a dotted path into the event), read once when
the router plans the message (:mod:`router.flow.keys`); the control then holds per
key value. ``tests/unit/flow/test_controls.py`` checks that this list, the fields of
:class:`schemas.flow.spec.FlowDef` and ``flow_decide``'s parameters agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from schemas.flow.spec import FlowDef


class Stage(StrEnum):
    ORDER = "order"
    WINDOW = "window"
    GATE = "gate"
    START_OPTION = "start_option"
    HOLD = "hold"
    RUN = "run"


@dataclass(frozen=True)
class Control:
    """``name``: the field of ``flow`` (and, for a control that skips, the skip reason
    recorded in ``flow_decisions`` and counted by ``pipeline_flow_runs_skipped_total``)."""

    name: str
    stage: Stage
    skips: bool = False  # a gate control that can skip a trigger (never run)
    sql_prefix: str | None = None  # a gate control's parameter prefix in flow_decide


# In the order a trigger meets them; within the gate, the order of flow_decide.
CONTROLS: tuple[Control, ...] = (
    Control("ordered", Stage.ORDER),
    Control("debounce", Stage.WINDOW),
    Control("batch", Stage.WINDOW),
    Control("singleton", Stage.GATE, skips=True, sql_prefix="p_sg_"),
    Control("rate_limit", Stage.GATE, skips=True, sql_prefix="p_rl_"),
    Control("throttle", Stage.GATE, sql_prefix="p_th_"),
    # Records the run's match key with its decision; the cancelling event acts later.
    Control("cancel_on", Stage.GATE, sql_prefix="p_cx_"),
    Control("priority", Stage.START_OPTION),
    Control("fairness", Stage.START_OPTION),
    Control("concurrency", Stage.HOLD),
    Control("timeouts", Stage.RUN),
)
BY_NAME = {c.name: c for c in CONTROLS}


def of_stage(stage: Stage) -> tuple[str, ...]:
    """The names of the controls of ``stage``, in :data:`CONTROLS` order."""
    return tuple(c.name for c in CONTROLS if c.stage == stage)


GATE_ORDER = of_stage(Stage.GATE)
# The reasons a gate records for a trigger it skips (each the control's name).
SKIP_REASONS = tuple(c.name for c in CONTROLS if c.skips)


def declared(flow: FlowDef | None, stage: Stage) -> list[str]:
    """The controls of ``stage`` that ``flow`` declares."""
    if flow is None:
        return []
    return [name for name in of_stage(stage) if getattr(flow, name) is not None]
