"""Which concurrency slot a run holds: ``flow.concurrency`` and ``flow.priority`` applied
to the run's event (pure). The worker's ``start_run`` calls :func:`flow_slot_for` and
records the result with the plan; the router's flow gate can call :func:`priority_of`
to dead-letter a bad priority before it starts anything.

The key is read with :func:`schemas.flow.spec.key_value` (a missing or null key is
:class:`~schemas.flow.spec.FlowKeyMissing`, DLQ reason ``flow_key_missing``). A priority
read from the event must be an integer 1..5; anything else is the same error on the
event (the router dead-letters it before starting; a run that still meets one fails
its planning, naming the field).
"""

from __future__ import annotations

from typing import Any

from schemas.flow.spec import FlowDef, FlowKeyMissing, PriorityDef, key_value
from schemas.ids import flow_resource
from schemas.workflow_io import FlowSlot

DEFAULT_PRIORITY = 3  # Temporal's default priority key: the middle of 1..5
# A waiting run refreshes its place in the queue at least every 30 s (its longest wait
# between rounds); a waiter not seen for this long (its run was terminated) no longer
# counts, in the queue order nor in `ingest flow list`.
WAITER_STALE_SECONDS = 120.0


def priority_of(priority: PriorityDef | None, event: dict[str, Any] | None) -> int:
    """1 (admitted first) .. 5 (last); :data:`DEFAULT_PRIORITY` without a priority."""
    if priority is None:
        return DEFAULT_PRIORITY
    if priority.fixed is not None:
        return priority.fixed
    assert priority.key is not None  # PriorityDef: exactly one of fixed, key
    node: Any = event or {}
    for part in priority.key.split("."):
        if not isinstance(node, dict) or part not in node:
            raise FlowKeyMissing("priority", priority.key, "missing from the event")
        node = node[part]
    if isinstance(node, bool) or not isinstance(node, int) or not 1 <= node <= 5:
        raise FlowKeyMissing("priority", priority.key, f"is {node!r}, not an integer 1..5")
    return node


def flow_slot_for(
    activity_id: str, flow: FlowDef | None, event: dict[str, Any] | None
) -> FlowSlot | None:
    """The run's slot, or None when the activity's runs are not concurrency-limited."""
    if flow is None or flow.concurrency is None:
        return None
    conc = flow.concurrency
    key = None if conc.key is None else key_value(event or {}, conc.key, control="concurrency")
    return FlowSlot(
        resource=flow_resource(activity_id, key),
        activity_id=activity_id,
        key=key,
        limit=conc.limit,
        priority=priority_of(flow.priority, event),
    )
