"""The fuzz activities: one plain, one per flow control, each keyed on the fuzzed event.

Every keyed control reads ``data.k`` (the priority ``data.p``), so the fuzzed keys
(any Unicode, NULs, thousands of random characters, every JSON type) reach the flow
tables (``flow_gcra``, ``flow_decisions``, ``flow_singleton``, ``flow_windows``,
``permit_slots``). The plain activity renders ``data.k`` into its task's idempotency
key, so the same keys reach the worker's claim (``task_instances``' unique index).
Limits are small enough that shared keys meet them (waits, delays, skips, windows
of several members) and short enough that every run ends within seconds.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg

WINDOWED = ("debounce", "batch")

# name -> (flow block or None, tasks or None for one noop)
DEFINITIONS: dict[str, tuple[dict[str, Any] | None, list[dict[str, Any]] | None]] = {
    "plain": (None, [{"type": "noop", "idempotency_key": "fz-plain:{data.k}"}]),
    "concurrency": ({"concurrency": {"limit": 2, "key": "data.k"}}, None),
    "throttle": ({"throttle": {"limit": 20, "period": "1s", "burst": 5, "key": "data.k"}}, None),
    "rate_limit": ({"rate_limit": {"limit": 2, "period": "10s", "key": "data.k"}}, None),
    "singleton": ({"singleton": {"mode": "skip", "key": "data.k"}}, None),
    "debounce": ({"debounce": {"period": "1s", "max_wait": "3s", "key": "data.k"}}, None),
    "batch": ({"batch": {"max_size": 4, "timeout": "2s", "key": "data.k"}}, None),
    "priority": (
        {"concurrency": {"limit": 1, "key": "data.k"}, "priority": {"key": "data.p"}},
        None,
    ),
}

# The event type each activity subscribes to (also what the strategies put in `type`).
TYPES = {name: f"fz.{name}" for name in DEFINITIONS}


@dataclass(frozen=True)
class FuzzActivity:
    name: str
    activity_id: str
    event_type: str

    @property
    def windowed(self) -> bool:
        return self.name in WINDOWED


async def seed(pool: asyncpg.Pool) -> dict[str, FuzzActivity]:
    """Insert every fuzz activity with the project's definitions store; by event type.

    Fresh ids per test run: the workflow ids derived from them never meet runs of an
    earlier session on the shared Temporal server."""
    # Imported here: the record generator imports this module for TYPES alone, and must
    # not load the project's modules (see tests/fuzz/generate.py).
    from tests.support.db import seed_activity

    out: dict[str, FuzzActivity] = {}
    for name, (flow, tasks) in DEFINITIONS.items():
        aid = await seed_activity(
            pool, TYPES[name], tasks=tasks, flow=flow, activity_id=uuid.uuid4()
        )
        out[TYPES[name]] = FuzzActivity(name, aid, TYPES[name])
    return out
