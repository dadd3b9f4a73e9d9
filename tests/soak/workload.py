"""The soak's mix of activities, its paced producer, the approver and the cron schedule.

Every event type is subscribed by exactly one activity (:data:`MIX`), so an event's
type says which run it must give; each activity has exactly one task, so every run
has one ``task_instances`` row (``harness.measure`` checks that):

* ``plain``: a noop task;
* ``concurrency``: ``concurrency: {limit: 2}``;
* ``throttle``: ``throttle: {limit: 2, period: 1s}``;
* ``batch``: ``batch: {max_size: 10, timeout: 2s}`` (one run per batch);
* ``ordered``: ``ordered: {key: data.k}`` (8 keys);
* ``emit``: an ``emit`` task, published by ``ingest relay`` from the outbox;
* ``approval``: an ``approval`` task that :class:`Approver` approves as ``alice``;
* ``cron``: a cron activity (every :data:`CRON_SECONDS` s) on a Temporal Schedule.

Only ``plain`` and ``emit`` runs count in the latency figures: the others wait on
purpose (a throttle, a window, a line, a human).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import orjson
from aiokafka import AIOKafkaProducer

from definitions import store
from pipeline.kafka import header
from schemas import ids
from schemas.definitions import ActivityDef

CRON_SECONDS = 15
ORDERED_KEYS = 8
APPROVER = "alice"
SLA_SECONDS = 24 * 3600  # far beyond any soak: no approval expires or escalates


@dataclass(frozen=True)
class Kind:
    name: str
    weight: int  # events of this kind in one cycle of the producer
    tasks: tuple[dict[str, Any], ...]
    flow: dict[str, Any] | None = None
    latency: bool = False


NOOP = ({"type": "noop"},)
MIX = (
    Kind("plain", 3, NOOP, latency=True),
    Kind("concurrency", 1, NOOP, {"concurrency": {"limit": 2}}),
    Kind("throttle", 1, NOOP, {"throttle": {"limit": 2, "period": "1s"}}),
    Kind("batch", 2, NOOP, {"batch": {"max_size": 10, "timeout": "2s"}}),
    Kind("ordered", 1, NOOP, {"ordered": {"key": "data.k"}}),
    Kind("emit", 1, ({"type": "emit", "payload": {"soak": True}},), latency=True),
    Kind(
        "approval",
        1,
        (
            {
                "type": "approval",
                "payload": {"amount": 1},
                "config": {"approvers": [APPROVER], "sla_seconds": SLA_SECONDS},
            },
        ),
    ),
)
CYCLE = tuple(k.name for k in MIX for _ in range(k.weight))
LATENCY_KINDS = frozenset(k.name for k in MIX if k.latency)


@dataclass(frozen=True)
class Activities:
    """The seeded activities: per kind, its id and event type; the cron activity's id."""

    ids: dict[str, str]
    types: dict[str, str]
    cron: str

    def kind_of(self, event_type: str) -> str | None:
        return next((k for k, t in self.types.items() if t == event_type), None)


def definitions(tag: str) -> tuple[list[ActivityDef], Activities]:
    """The activities of :data:`MIX` and the cron one, validated as ``activities apply``
    validates a file; event types carry ``tag`` (one soak's own)."""
    acts: list[ActivityDef] = []
    aids: dict[str, str] = {}
    types: dict[str, str] = {}
    for k in MIX:
        aid = uuid.uuid4()
        aids[k.name], types[k.name] = str(aid), f"soak.{tag}.{k.name}"
        doc: dict[str, Any] = {
            "id": aid,
            "name": f"soak {k.name}",
            "trigger": {"type": "event", "event_type": types[k.name]},
            "tasks": list(k.tasks),
        }
        if k.flow is not None:
            doc["flow"] = k.flow
        acts.append(ActivityDef.model_validate(doc))
    cron = uuid.uuid4()
    acts.append(
        ActivityDef.model_validate(
            {
                "id": cron,
                "name": "soak cron",
                "trigger": {
                    "type": "cron",
                    "cron": "* * * * *",
                    "interval_seconds": CRON_SECONDS,
                    "misfire_policy": "skip",
                },
                "tasks": list(NOOP),
            }
        )
    )
    return acts, Activities(aids, types, str(cron))


async def seed(pool: asyncpg.Pool) -> Activities:
    acts, seeded = definitions(uuid.uuid4().hex[:8])
    await store.upsert(pool, acts)
    return seeded


def value(i: int, event_type: str) -> bytes:
    return orjson.dumps({"type": event_type, "data": {"i": i, "k": f"k{i % ORDERED_KEYS}"}})


@dataclass
class Produced:
    """What the producer sent: acknowledged writes, and sends it had to repeat."""

    acked: int = 0
    retries: int = 0
    per_kind: Counter[str] = field(default_factory=Counter)


async def _send_all(producer: AIOKafkaProducer, topic: str, values: list[bytes]) -> int:
    """Send ``values``; those that failed (no leader while a broker restarts) are sent
    again, so one may be on the topic twice: the checks read the topic itself. Returns
    how many sends were repeated."""
    retries = 0
    pending = values
    while pending:
        results: list[Any] = []
        for v in pending:
            try:
                results.append(await producer.send(topic, v))
            except Exception as exc:  # the batch could not even be queued
                results.append(exc)
        failed = []
        for v, res in zip(pending, results, strict=True):
            try:
                if isinstance(res, Exception):
                    raise res
                await res
            except Exception:
                failed.append(v)
        retries += len(failed)
        pending = failed
        if failed:
            await asyncio.sleep(1)
    return retries


async def produce(
    bootstrap: str,
    topic: str,
    acts: Activities,
    rate: float,
    until: float,
    out: Produced,
    *,
    kinds: tuple[str, ...] = CYCLE,
    start: int = 0,
) -> int:
    """About ``rate`` events a second, one batch a second (or one event every 1/rate s),
    cycling through ``kinds``, until the monotonic time ``until``; returns the next index."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    batch = max(1, round(rate))
    i = start
    try:
        next_at = time.monotonic()
        while time.monotonic() < until:
            names = [kinds[j % len(kinds)] for j in range(i, i + batch)]
            values = [
                value(j, acts.types[n]) for j, n in zip(range(i, i + batch), names, strict=True)
            ]
            out.retries += await _send_all(producer, topic, values)
            out.acked += len(values)
            out.per_kind.update(names)
            i += batch
            next_at += batch / rate
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
    finally:
        await producer.stop()
    return i


async def burst(bootstrap: str, topic: str, acts: Activities, n: int, out: Produced) -> None:
    """``n`` plain events at once (the ceiling measurement)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        out.retries += await _send_all(
            producer, topic, [value(-1 - j, acts.types["plain"]) for j in range(n)]
        )
        out.acked += n
        out.per_kind["plain"] += n
    finally:
        await producer.stop()


@dataclass(frozen=True)
class RawEvent:
    partition: int
    offset: int
    kind: str
    appended: float  # LogAppendTime (the raw topic is created so), seconds


def raw_events(records: list[Any], acts: Activities) -> list[RawEvent]:
    """What is really on the raw topic, by kind (every value is one the soak wrote)."""
    out = []
    for m in records:
        kind = acts.kind_of(orjson.loads(m.value)["type"])
        assert kind is not None, f"a raw record the soak did not write: {m.value[:200]!r}"
        out.append(RawEvent(m.partition, m.offset, kind, m.timestamp / 1000))
    return out


def event_workflow_id(acts: Activities, raw_topic: str, ev: RawEvent) -> str:
    return ids.event_workflow_id(
        acts.ids[ev.kind], ids.source_event_id(raw_topic, ev.partition, ev.offset)
    )


def record_id(m: Any) -> str:
    """The outbox row id a relayed record carries: an approval notice's ``notice_id``,
    else the emitting task's ``task_id`` (an ``emit`` row's id is its task's id)."""
    raw = header(m.headers, "notice_id") or header(m.headers, "task_id")
    assert raw is not None, f"a relayed record without its id: {m.headers}"
    return raw.decode()


@dataclass
class Approver:
    """Approves every waiting approval of the ``approval`` activity, as a person would
    (the ``decide`` update on its task workflow), every ``every`` seconds; errors while
    a server is down are counted and retried on the next round."""

    client: Any
    pool: asyncpg.Pool
    activity_id: str
    every: float = 2.0
    approved: set[str] = field(default_factory=set)
    errors: int = 0

    async def run(self) -> None:
        from schemas.approval_io import ApprovalDecision
        from workers.task_workflow import TaskInstanceWorkflow

        while True:
            try:
                rows = await self.pool.fetch(
                    "SELECT run_id FROM activity_runs WHERE activity_id = $1::uuid"
                    " AND status <> 'succeeded'",
                    self.activity_id,
                )
            except Exception:
                self.errors += 1
                rows = []
            for r in rows:
                task = ids.task_workflow_id(r["run_id"], "approval", 0)
                if task in self.approved:
                    continue
                handle = self.client.get_workflow_handle(task)
                try:
                    await asyncio.wait_for(
                        handle.execute_update(
                            TaskInstanceWorkflow.decide, ApprovalDecision(APPROVER, "approve")
                        ),
                        10,
                    )
                    self.approved.add(task)
                except Exception:  # not started yet, a server down, or decided already
                    self.errors += 1
            await asyncio.sleep(self.every)
