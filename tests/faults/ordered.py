"""flow.ordered under faults: a keyed paced producer, and the per-key order check.

The producer keys each raw record by its entity (``data.k``), as ordered producers
must: ingress keeps the key on the events topic, so one key's events share one
partition, in the order produced. Keys are picked so that every raw partition gets
some (Kafka's default partitioner, murmur2 of the key), several keys per partition,
interleaved.

:func:`measure_order` reads, per key and in the events' order, each run's place
(``flow_order_places``), its task's visits (``flow_visits``, written by the task
itself with the database's clock: ``tests/integration/flow/slot_handlers.py``) and its
run row, and counts what would break the guarantee: a run that started before the
run ahead of it in its line finished (or started before it), a place missing, out of
sequence or still open, a run whose task completed twice or never (a completion that
its killed worker never reported is retried by Temporal: counted as ``redone``,
allowed). It asserts nothing (the figures row is recorded first);
:meth:`OrderOutcome.check` does.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import asyncpg
import orjson
from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import DefaultPartitioner

from schemas import ids

FOREVER = datetime.max.replace(tzinfo=UTC)  # the end of a visit a live worker left open
VISIT_HANDLERS = "tests.integration.flow.slot_handlers"  # INGEST_TASK_HANDLERS of the worker


def spread_keys(per_partition: int, partitions: int) -> list[str]:
    """``per_partition`` key names for each of ``partitions`` (default partitioner), in
    an order that interleaves the partitions."""
    partitioner = DefaultPartitioner()
    every = list(range(partitions))
    by_partition: dict[int, list[str]] = defaultdict(list)
    for n in itertools.count():
        name = f"k{n}"
        p = partitioner(name.encode(), every, every)
        if len(by_partition[p]) < per_partition:
            by_partition[p].append(name)
        if all(len(by_partition[q]) == per_partition for q in every):
            break
    return [by_partition[p][i] for i in range(per_partition) for p in every]


@dataclass(frozen=True)
class Sent:
    """One produced event: its entity key and where the raw topic stored it."""

    key: str
    partition: int
    offset: int


@dataclass
class Keyed:
    events: list[Sent] = field(default_factory=list)

    @property
    def coords(self) -> list[tuple[int, int]]:
        return [(s.partition, s.offset) for s in self.events]


async def produce_keyed(
    bootstrap: str,
    topic: str,
    n: int,
    event_type: str,
    keys: list[str],
    seconds: float,
    out: Keyed,
    batch: int = 10,
    data: Callable[[int], dict[str, Any]] = lambda i: {},
) -> None:
    """Produce ``n`` id-less events keyed by ``keys[i % len(keys)]`` (also ``data.k``),
    spread over about ``seconds``; what was stored goes to ``out``, in produced order."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        batches = max(1, (n + batch - 1) // batch)
        pause = seconds / batches
        for b in range(batches):
            sent = []
            for i in range(b * batch, min(n, (b + 1) * batch)):
                key = keys[i % len(keys)]
                body = {"type": event_type, "data": {"k": key, "i": i, **data(i)}}
                sent.append((key, await producer.send(topic, orjson.dumps(body), key=key.encode())))
            for key, fut in sent:
                md = await fut
                out.events.append(Sent(key, md.partition, md.offset))
            await asyncio.sleep(pause)
    finally:
        await producer.stop()


def lines(activity_id: str, raw_topic: str, produced: Keyed) -> dict[str, list[str]]:
    """Per key, the workflow ids of its runs in its events' order (produced order; a key's
    records share one partition, so that is their offset order too)."""
    out: dict[str, list[str]] = defaultdict(list)
    where: dict[str, set[int]] = defaultdict(set)
    for s in produced.events:
        eid = ids.source_event_id(raw_topic, s.partition, s.offset)
        out[s.key].append(ids.event_workflow_id(activity_id, eid))
        where[s.key].add(s.partition)
    assert all(len(p) == 1 for p in where.values()), f"a key over two partitions: {where}"
    return dict(out)


@dataclass
class OrderOutcome:
    """What :func:`measure_order` counted; every count but ``interrupted`` must be 0."""

    keys: int
    runs: int
    out_of_order: int  # a run whose task first started before the run ahead of it
    overlaps: int  # a run that started before the run ahead of it finished
    places_bad: int  # a run without its place, out of sequence, or its place still open
    never_ran: int  # a run whose task never completed (no visit, or every visit cut)
    ran_twice: int  # a run whose task completed (left the handler) twice
    interrupted: int  # visits cut short by a killed worker (retried: allowed)
    redone: int  # visits that completed, but their worker died before reporting it (allowed)
    contended: int  # runs placed while the run ahead in their line had not finished
    examples: dict[str, list[Any]] = field(default_factory=dict)

    def figures(self) -> dict[str, Any]:
        return {
            "keys": self.keys,
            "out_of_order": self.out_of_order,
            "overlaps": self.overlaps,
            "interrupted": self.interrupted,
            "redone": self.redone,
            "contended": self.contended,
        }

    def check(self) -> None:
        ex = self.examples
        assert not self.out_of_order, f"{self.out_of_order} runs out of order: {ex['order']}"
        assert not self.overlaps, f"{self.overlaps} runs started too early: {ex['overlap']}"
        assert not self.places_bad, f"{self.places_bad} bad places: {ex['place']}"
        assert not self.never_ran, f"{self.never_ran} runs never ran: {ex['never']}"
        assert not self.ran_twice, f"{self.ran_twice} tasks completed twice: {ex['twice']}"


LOST_REPORT = 2.0  # s: a worker killed this soon after its task left the handler may not
# have reported the completion (the SDK sends it right after the handler returns)


def _report_lost(
    visit: asyncpg.Record, visits: list[asyncpg.Record], killed_at: dict[str, datetime]
) -> bool:
    """A completed visit whose completion died with its worker: the worker was killed
    within ``LOST_REPORT`` of the visit's exit and a later attempt ran. Temporal runs an
    activity at least once, so that second run is its retry, not a second run of the
    task; a completion the worker outlived, or a repeat within one attempt, is not."""
    died = killed_at.get(visit["worker"])
    if died is None:
        return False
    lag = (died - visit["exited_at"]).total_seconds()
    return 0 <= lag <= LOST_REPORT and any(v["attempt"] > visit["attempt"] for v in visits)


async def measure_order(
    pool: asyncpg.Pool,
    activity_id: str,
    raw_topic: str,
    produced: Keyed,
    killed_at: dict[str, datetime] | None = None,
) -> OrderOutcome:
    """Count, per key, the breaches of the order guarantee (see the module doc).

    ``killed_at``: when each killed worker (by its ``FLOW_TEST_WORKER`` name) died; a
    visit it left open is taken to last until then. An open visit of a live worker is
    taken to last for ever (it breaks the order of every later run of its key)."""
    killed_at = killed_at or {}
    by_key = lines(activity_id, raw_topic, produced)
    runs = {
        r["workflow_id"]: r
        for r in await pool.fetch(
            "SELECT workflow_id, run_id::text AS run_id, finished_at FROM activity_runs"
            " WHERE activity_id = $1::uuid",
            activity_id,
        )
    }
    places = {
        r["workflow_id"]: r
        for r in await pool.fetch(
            "SELECT workflow_id, key, seq, outcome, placed_at, done_at FROM flow_order_places"
            " WHERE activity_id = $1::uuid",
            activity_id,
        )
    }
    visits: dict[str, list[asyncpg.Record]] = defaultdict(list)
    for v in await pool.fetch(
        "SELECT run_id, worker, attempt, entered_at, exited_at FROM flow_visits ORDER BY id"
    ):
        visits[v["run_id"]].append(v)

    ex: dict[str, list[Any]] = {k: [] for k in ("order", "overlap", "place", "never", "twice")}
    counts = dict.fromkeys(ex, 0)
    interrupted = contended = redone = 0

    def bad(kind: str, what: Any) -> None:
        counts[kind] += 1
        if len(ex[kind]) < 3:
            ex[kind].append(what)

    for key, wids in by_key.items():
        spans: list[tuple[str, datetime, datetime] | None] = []
        for seq, wid in enumerate(wids, start=1):
            place = places.get(wid)
            if (
                place is None
                or (place["key"], place["seq"]) != (key, seq)
                or (place["done_at"] is None or place["outcome"] != "succeeded")
            ):
                bad("place", (key, seq, wid, place and dict(place)))
            run = runs.get(wid)
            vs = visits.get(run["run_id"], []) if run else []
            if not vs:
                bad("never", (key, seq, wid))
                spans.append(None)
                continue
            done = [v for v in vs if v["exited_at"] is not None]
            lost = [v for v in done[:-1] if _report_lost(v, vs, killed_at)]
            redone += len(lost)
            if len(done) - len(lost) != 1:
                bad("twice" if done else "never", (key, seq, wid, len(done)))
            ends = []
            for v in vs:
                if v["exited_at"] is not None:
                    ends.append(v["exited_at"])
                else:
                    interrupted += 1
                    died = killed_at.get(v["worker"])
                    ends.append(died if died is not None else FOREVER)
            assert run is not None
            if run["finished_at"] is not None:
                ends.append(run["finished_at"])
            spans.append((wid, min(v["entered_at"] for v in vs), max(ends)))
        for ahead, behind in itertools.pairwise(s for s in spans if s is not None):
            got = places.get(behind[0])
            contended += got is not None and got["placed_at"] < ahead[2]
            if behind[1] < ahead[1]:
                bad("order", (key, ahead, behind))
            if behind[1] < ahead[2]:
                bad("overlap", (key, ahead, behind))
    return OrderOutcome(
        keys=len(by_key),
        runs=sum(map(len, by_key.values())),
        out_of_order=counts["order"],
        overlaps=counts["overlap"],
        places_bad=counts["place"],
        never_ran=counts["never"],
        ran_twice=counts["twice"],
        interrupted=interrupted,
        redone=redone,
        contended=contended,
        examples=ex,
    )
