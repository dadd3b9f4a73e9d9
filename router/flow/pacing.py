"""GCRA (generic cell rate algorithm) parameters of ``throttle`` and ``rate_limit``.

The state is one theoretical arrival time (TAT) per (activity, control, key) in
``flow_gcra``; the atomic update is SQL (``flow_throttle_take`` / ``flow_rate_take``
in migration 0008), called from ``flow_decide``. With emission interval
``T = period / limit`` and tolerance ``tau``:

* throttle (queue, never drop): a start arriving at ``now`` gets
  ``base = max(tat, now)``, starts at ``max(now, base - tau)``, and the TAT becomes
  ``base + T``. ``tau = (burst - 1) * T``: ``burst`` starts go at once, then one every T.
* rate limit (drop): a trigger conforms when ``max(tat, now) - now <= tau``; it then
  advances the TAT by T, else it is skipped and the TAT is unchanged.
  ``tau = period - T``: ``limit`` triggers pass at once from idle, then one every T.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from schemas.flow.spec import RateLimitDef, ThrottleDef


@dataclass(frozen=True)
class Gcra:
    interval: float  # T, seconds between two starts at the sustained rate
    tolerance: float  # tau, seconds a start may come ahead of its theoretical time

    @classmethod
    def throttle(cls, d: ThrottleDef) -> Gcra:
        t = d.period / d.limit
        return cls(t, (d.burst - 1) * t)

    @classmethod
    def rate_limit(cls, d: RateLimitDef) -> Gcra:
        t = d.period / d.limit
        return cls(t, d.period - t)

    def next_start(self, tat: datetime, now: datetime) -> datetime:
        """When a throttled start arriving at ``now`` would start, given the stored TAT."""
        return max(now, tat - timedelta(seconds=self.tolerance))

    def conforms(self, tat: datetime, now: datetime) -> bool:
        """Whether a rate-limited trigger arriving at ``now`` would pass."""
        return max(tat, now) - now <= timedelta(seconds=self.tolerance)
