"""Retrying, written once: the service loops' capped backoff, and the workflows' RetryPolicy.

* :func:`backoff`: the delays between attempts of a loop that retries a transient
  failure until it succeeds or the process stops (ingress delivery, the router's
  ledger and commits, the starter): 0.2 s doubling up to 10 s. Short enough that a
  broker or Temporal back from a blip is noticed at once, capped so a long outage
  costs one attempt per 10 s per loop.
* :data:`UNTIL_DONE`: the ``RetryPolicy`` of steps that must not fail for an outage
  (bookkeeping in PostgreSQL, notices to Kafka, the cron fire): no attempt limit,
  1 s doubling up to 30 s. Workflow code: a constant, nothing else here runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

from temporalio.common import RetryPolicy

BACKOFF_INITIAL = 0.2
BACKOFF_MAX = 10.0

UNTIL_DONE = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
)


def backoff(initial: float = BACKOFF_INITIAL, maximum: float = BACKOFF_MAX) -> Iterator[float]:
    """``initial``, then each delay doubled, capped at ``maximum`` (endless)."""
    delay = initial
    while True:
        yield delay
        delay = min(delay * 2, maximum)
