"""``flow.cancel_on``: an event of a named type cancels the unfinished runs it matches.

Two sides, both in the router, both in PostgreSQL (migration 0018):

* **The run's side** (gate stage): when a run of an activity with ``cancel_on`` is
  decided, ``flow_decide`` records its *match keys* (``p_cx_key``) with the decision's
  time. A rule's key is a hash of its ``our_path``s and the run's event's values at
  them (:func:`match_key`), one per distinct set of paths among the rules, so two rules
  that match on the same fields share one key.
* **The cancelling side**: a message whose type some activity's rule names is a
  cancelling event (:meth:`Cancels.plan`, beside the runs it triggers). For each such
  (activity, rule) the router reads the rule's ``their_path`` values from it, builds
  the same key, and ``flow_cancel_take`` records the event once per activity (its
  first processing time), records the cancel request (``ended_by =
  'cancel_on:<event_id>'``, where the worker reads it) of every run with that key
  decided *before* that time and not finished, and returns them; the router then asks
  Temporal to cancel each (:meth:`Cancels.act`), before the message's offset completes.

A redelivered or replayed cancelling event finds its first processing time recorded:
it re-requests the cancellation of the runs decided before it (idempotent: Temporal's
"not found" or an already closed run is fine) and never reaches a run decided after it.

A value missing from the cancelling event is an error of that event, as a flow key's
is: the message goes to the DLQ ``flow_key_missing`` naming ``flow.cancel_on[i].match``
(a cancelling event that cannot say what it cancels would otherwise pass unnoticed).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
import orjson
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from pipeline.starter import outage
from router.flow import metrics as flow_metrics
from schemas.flow.spec import CancelRule, key_value

log = logging.getLogger(__name__)

# The namespace of match keys (uuid5 of the canonical path/value pairs): a format that
# never changes, as recorded keys must match keys built later.
_KEY_NS = uuid.UUID("5f3c7c1e-39a1-4c55-9b0e-0c2d8e9a3901")


def match_key(pairs: Iterable[tuple[str, str]]) -> str:
    """The key of ``(our_path, value)`` pairs: order-free, any length or character."""
    canonical = orjson.dumps(sorted(pairs)).decode()
    return str(uuid.uuid5(_KEY_NS, canonical))


def _control(i: int) -> str:
    return f"cancel_on[{i}].match"


def run_keys(rules: Sequence[CancelRule], event: dict[str, Any]) -> tuple[str, ...]:
    """A run's match keys from its own event (its ``our_path`` values), one per distinct
    set of paths; raises ``FlowKeyMissing`` (DLQ) when a value is missing."""
    keys: dict[tuple[str, ...], str] = {}
    for i, rule in enumerate(rules):
        paths = tuple(sorted(set(rule.match.values())))
        if paths not in keys:
            keys[paths] = match_key((p, key_value(event, p, control=_control(i))) for p in paths)
    return tuple(keys.values())


def cancel_key(rule: CancelRule, index: int, event: dict[str, Any]) -> str:
    """The key a cancelling ``event`` matches under ``rule``: its ``their_path`` values,
    each under the ``our_path`` it is compared with."""
    return match_key(
        (ours, key_value(event, theirs, control=_control(index)))
        for theirs, ours in rule.match.items()
    )


@dataclass(frozen=True)
class CancelTarget:
    """One activity whose runs a cancelling event cancels, with the key it matches."""

    activity_id: str
    key: str


def targets(
    rules_of: Iterable[tuple[str, Sequence[CancelRule]]], event_type: str, event: dict[str, Any]
) -> list[CancelTarget]:
    """Every (activity, key) ``event`` cancels; raises ``FlowKeyMissing`` (DLQ) when a
    rule naming its type finds a value missing. ``rules_of``: (activity, its rules)."""
    out: list[CancelTarget] = []
    for activity_id, rules in rules_of:
        seen: set[str] = set()
        for i, rule in enumerate(rules):
            if rule.event_type != event_type:
                continue
            key = cancel_key(rule, i, event)
            if key not in seen:
                seen.add(key)
                out.append(CancelTarget(activity_id, key))
    return out


@dataclass(frozen=True)
class Taken:
    workflow_ids: list[str]
    fresh: bool  # the event's first processing (False: a redelivery or a replay)


class Cancels:
    """The cancelling side: record, find and cancel (one call per message and target)."""

    def __init__(self, pool: asyncpg.Pool, client: Client) -> None:
        self.pool = pool
        self.client = client

    async def take(self, event_id: str, target: CancelTarget) -> Taken:
        row = await self.pool.fetchrow(
            "SELECT workflow_ids, fresh FROM flow_cancel_take($1, $2, $3)",
            event_id,
            uuid.UUID(target.activity_id),
            target.key,
        )
        assert row is not None
        return Taken(list(row["workflow_ids"]), bool(row["fresh"]))

    async def act(self, event_id: str, target: CancelTarget) -> int:
        """Cancel the target's runs decided before ``event_id``; returns how many were
        asked to stop. Counted once, on the event's first processing."""
        taken = await self.take(event_id, target)
        for wid in taken.workflow_ids:
            await request_cancel(self.client, wid, f"cancel_on:{event_id}")
        if taken.fresh and taken.workflow_ids:
            flow_metrics.FLOW_RUNS_CANCELLED.labels(activity=target.activity_id).inc(
                len(taken.workflow_ids)
            )
        if taken.workflow_ids:
            log.info(
                "event %s cancels %d run(s) of activity %s",
                event_id,
                len(taken.workflow_ids),
                target.activity_id,
            )
        return len(taken.workflow_ids)


async def request_cancel(client: Client, workflow_id: str, reason: str) -> None:
    """Ask Temporal to cancel ``workflow_id`` with ``reason`` (the run reads it:
    ``workflow.cancellation_reason()``): idempotent; a run that is not there or already
    closed is left as it is; an outage is a ConnectionError (retried)."""
    try:
        await client.get_workflow_handle(workflow_id).cancel(reason=reason)
    except RPCError as exc:
        if outage(exc) is not None:
            what = f"cancel {workflow_id}: {exc.status.name}: {exc.message}"
            raise ConnectionError(what) from exc
        if exc.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION):
            raise
        log.debug("cancel of %s: %s (closed or unknown)", workflow_id, exc.message)
