"""The flow keys of one run, read from its event when the message is planned."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from schemas.flow.concurrency import priority_of
from schemas.flow.spec import FlowDef, key_value

# The key value of a control declared without a key: the activity is one bucket.
NO_KEY = ""


@dataclass(frozen=True)
class FlowKeys:
    """An activity's flow block as planned, with the event's value of each control's key."""

    flow: FlowDef
    keys: Mapping[str, str] = field(default_factory=dict)
    # Temporal's task priority of the start (1..5), when the flow declares a priority.
    priority: int | None = None

    def key(self, control: str) -> str:
        return self.keys.get(control, NO_KEY)


def read_keys(flow: FlowDef, event: dict[str, Any]) -> FlowKeys:
    """Every key ``flow`` needs, read from ``event``; raises ``FlowKeyMissing`` (DLQ).

    A priority read from the event must be an integer 1..5 (``priority_of``): anything
    else is refused here, so the event goes to the DLQ instead of a run whose planning
    would fail.
    """
    return FlowKeys(
        flow,
        {control: key_value(event, path, control=control) for control, path in flow.keys().items()},
        priority=priority_of(flow.priority, event) if flow.priority is not None else None,
    )
