"""``flow.fairness`` applied to a run's event (pure): the Temporal fairness key and weight.

The router reads it when it plans a message (:func:`router.flow.keys.read_keys`), so an
event whose key or weight is unusable goes to the DLQ at the edge, like a bad flow key,
instead of reaching a start that Temporal refuses; the starter sends it in the start's
``temporalio.common.Priority`` (:meth:`pipeline.starter.Starter.start`).

* The key is read with :func:`schemas.flow.spec.key_value` (missing or null:
  ``flow_key_missing``), and must also fit Temporal's fairness key limit,
  :data:`MAX_FAIRNESS_KEY_BYTES` (over it: ``bad_flow_key``). Temporal refuses a longer
  key at the start (``InvalidArgument``): refusing it here names the field.
* The weight is ``weight`` (fixed), or the number at ``weight_key`` in the event: missing
  or null is ``flow_key_missing``; anything but a number in (0, 1000] (a string, a
  boolean, 0, a negative number) is ``bad_flow_key``. Without either, no weight is sent:
  the server's default, 1, or the task queue's override for the key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from schemas.envelope import EnvelopeError
from schemas.flow.spec import R_BAD_FLOW_KEY, R_FLOW_KEY_MISSING, FairnessDef, key_value

# Temporal's limit on ``Priority.fairness_key`` (the API's documented 64 bytes, UTF-8).
MAX_FAIRNESS_KEY_BYTES = 64
# FairnessDef.weight's ceiling, and the server's: it clamps weights to 0.001..1000.
MAX_FAIRNESS_WEIGHT = 1000.0


@dataclass(frozen=True)
class Fairness:
    """What one start carries: the fairness key's value and its weight (None: default)."""

    key: str
    weight: float | None = None


def fairness_of(fairness: FairnessDef, event: dict[str, Any], key: str | None = None) -> Fairness:
    """The run's :class:`Fairness`, read from ``event``; raises ``EnvelopeError`` (DLQ).

    ``key``: the fairness key's value when the caller already read it (``read_keys``
    reads every control's key once); read here otherwise.
    """
    value = key if key is not None else key_value(event, fairness.key, control="fairness")
    size = len(value.encode())
    if size > MAX_FAIRNESS_KEY_BYTES:
        raise EnvelopeError(
            R_BAD_FLOW_KEY,
            f"flow.fairness.key {fairness.key!r} is {size} bytes, over Temporal's"
            f" {MAX_FAIRNESS_KEY_BYTES}-byte fairness key limit",
        )
    if fairness.weight_key is None:
        return Fairness(value, fairness.weight)
    return Fairness(value, weight_of(fairness.weight_key, event))


def weight_of(path: str, event: dict[str, Any]) -> float:
    """The positive number at ``path`` in ``event`` (a fairness weight, at most 1000)."""
    node: Any = event
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            node = None
            break
        node = node[part]
    where = f"flow.fairness.weight_key {path!r}"
    if node is None:
        raise EnvelopeError(R_FLOW_KEY_MISSING, f"{where}: missing from the event (or null)")
    ok = isinstance(node, int | float) and not isinstance(node, bool)
    if not ok or not math.isfinite(node) or not 0 < node <= MAX_FAIRNESS_WEIGHT:
        raise EnvelopeError(
            R_BAD_FLOW_KEY, f"{where}: is {node!r}, not a number above 0 and at most 1000"
        )
    return float(node)
