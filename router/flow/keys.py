"""The flow keys of one run, read from its event when the message is planned."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from router.flow.cancel import run_keys
from schemas.flow.concurrency import priority_of
from schemas.flow.fairness import Fairness, fairness_of
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
    # Temporal's fairness key and weight of the start, when the flow declares fairness.
    fairness: Fairness | None = None
    # flow.cancel_on: the run's match keys (router.flow.cancel.run_keys), recorded by
    # flow_decide so that a cancelling event finds the run.
    cancel_keys: tuple[str, ...] = ()

    def key(self, control: str) -> str:
        return self.keys.get(control, NO_KEY)


def read_keys(flow: FlowDef, event: dict[str, Any]) -> FlowKeys:
    """Every key ``flow`` needs, read from ``event``; raises ``FlowKeyMissing`` (DLQ).

    A priority read from the event must be an integer 1..5 (``priority_of``): anything
    else is refused here, so the event goes to the DLQ instead of a run whose planning
    would fail. A fairness key over Temporal's 64 bytes, or a weight read from the event
    that is not a number in (0, 1000], is refused the same way (``fairness_of``).
    """
    keys = {
        control: key_value(event, path, control=control) for control, path in flow.keys().items()
    }
    return FlowKeys(
        flow,
        keys,
        priority=priority_of(flow.priority, event) if flow.priority is not None else None,
        fairness=(
            fairness_of(flow.fairness, event, keys["fairness"])
            if flow.fairness is not None
            else None
        ),
        cancel_keys=run_keys(flow.cancel_on, event) if flow.cancel_on else (),
    )
