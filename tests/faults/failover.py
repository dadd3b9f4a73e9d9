"""Broker-failover scenarios, the common part: a stream through the real pipeline on the cluster.

:func:`run` spawns ingress, router and worker (``harness.Pipeline``) with
``KAFKA_BOOTSTRAP_SERVERS`` naming all three brokers, produces a steady stream
to the raw topic until the scenario's fault sequence is over (at least
``min_events``), then checks, from what is really on the topics:

* every write the producer had acknowledged is on the raw topic, unchanged
  (``acks=all`` + ``min.insync.replicas=2`` + unclean election off);
* every raw message gives exactly one run (``harness.verify``: 0 lost, 0
  duplicate runs or executions) or, if malformed (one in ``BAD_EVERY``), exactly
  one distinct DLQ entry naming its coordinates;
* every good raw message reached the events topic; extra copies there are
  allowed (the router absorbs them) and counted;
* both consumer groups committed to the end and no process died.

Figures: ``event_copies`` / ``dlq_copies`` (extra copies), ``stall_s`` (the
longest time from a raw event's append to the raw topic, broker time, to its
workflow's start, over the events appended once the pipeline was flowing: the
worst routing stall, end to end; ``stall_at`` is when that event was appended)
and ``route_p50_s`` (the median, for scale).
"""

from __future__ import annotations

import asyncio
import functools
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import orjson
from aiokafka import AIOKafkaProducer
from devstack.kafka_cluster import KafkaCluster

from pipeline.kafka import header
from schemas import ids
from tests.faults import harness as h
from tests.faults.dashboard import Dashboard
from tests.support import db, kafka, wait
from tests.support.stack import Topics

BAD_EVERY = 25  # one raw message in 25 is malformed and must end in the DLQ
BAD_PREFIX = b"not json "


@dataclass
class Stream:
    """What the test producer sent: acknowledged coordinates and values, and retries."""

    acked: dict[tuple[int, int], bytes] = field(default_factory=dict)
    retries: int = 0


def _value(i: int, event_type: str) -> bytes:
    if i % BAD_EVERY == BAD_EVERY - 1:
        return BAD_PREFIX + str(i).encode()
    return orjson.dumps({"type": event_type, "data": {"i": i}})


async def produce_until(
    bootstrap: str,
    topic: str,
    event_type: str,
    done: asyncio.Event,
    min_events: int,
    rate: float,
    out: Stream,
) -> None:
    """About ``rate`` messages a second, in one batch a second, until ``done`` and
    ``min_events`` sent.

    A send that fails (its batch expired while no leader answered) is sent again:
    it may then be on the topic twice, which is fine, because the checks read
    the topic itself; the failure is counted in ``out.retries``.
    """
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    batch = max(1, round(rate))
    try:
        i = 0
        while i < min_events or not done.is_set():
            pending = [_value(j, event_type) for j in range(i, i + batch)]
            i += batch
            while pending:
                results: list[Any] = []
                for value in pending:
                    try:
                        results.append(await producer.send(topic, value))
                    except Exception as exc:
                        results.append(exc)
                failed = []
                for value, res in zip(pending, results, strict=True):
                    try:
                        md = res if isinstance(res, Exception) else await res
                    except Exception as exc:
                        md = exc
                    if isinstance(md, Exception):
                        failed.append(value)
                    else:
                        out.acked[(md.partition, md.offset)] = value
                out.retries += len(failed)
                pending = failed
                if failed:
                    await asyncio.sleep(1)
            await asyncio.sleep(batch / rate)
    finally:
        await producer.stop()


@dataclass
class Ctx:
    """What a scenario's fault sequence works with."""

    cluster: KafkaCluster
    pipe: h.Pipeline
    topics: Topics
    pool: asyncpg.Pool
    producing: asyncio.Task[None]
    dashboard: Dashboard

    async def routing_progressed(self) -> None:
        """Until the router starts something new: a fault then lands mid-stream."""
        before = await self.pool.fetchval("SELECT count(*) FROM routed_triggers")

        async def progressed() -> bool:
            for child in self.pipe.children:
                child.assert_alive()
            if self.producing.done():
                self.producing.result()  # the producer's error, if it failed
                raise AssertionError("the stream ended before the fault")
            return int(await self.pool.fetchval("SELECT count(*) FROM routed_triggers")) > before

        await wait.eventually(progressed, 120, "the router to start new runs")


Fault = Callable[[Ctx], Awaitable[dict[str, Any]]]


async def run(
    scenario: str,
    fault: Fault,
    *,
    cluster: KafkaCluster,
    temporal_address: str,
    database_url: str,
    topics: Topics,
    task_queue: str,
    temporal: Any,
    pool: asyncpg.Pool,
    tmp: Any,
    min_events: int,
    rate: float,
) -> dict[str, Any]:
    """Run ``fault`` while a stream flows; check everything; record and return the figures."""
    t0 = time.monotonic()
    # The figures row exists from the start and is filled as figures are known,
    # before the asserts that guard them: a failing run shows its real numbers.
    row = h.Figures(scenario, t0)
    etype = f"fault.failover.{uuid.uuid4().hex[:8]}"
    aid = await db.seed_activity(pool, etype)
    ep = h.Endpoints(cluster.bootstrap, temporal_address, database_url)
    pipe = h.Pipeline(tmp, ep, topics, task_queue)
    stream = Stream()
    done = asyncio.Event()
    producing: asyncio.Task[None] | None = None
    sampling: asyncio.Task[None] | None = None
    try:
        children = {kind: await pipe.spawn(kind, metrics=True) for kind in ("ingress", "router")}
        await pipe.spawn("worker")
        dashboard = Dashboard(children, tmp / "dashboard.csv")
        sampling = asyncio.create_task(dashboard.run())
        producing = asyncio.create_task(
            produce_until(cluster.bootstrap, topics.raw, etype, done, min_events, rate, stream)
        )
        t_fault = time.monotonic()
        faults = await fault(Ctx(cluster, pipe, topics, pool, producing, dashboard))
        faults["fault_s"] = round(time.monotonic() - t_fault)
        row.update(**faults)
        done.set()
        await producing
        t_drain = time.monotonic()
        await _check(cluster.bootstrap, topics, aid, stream, temporal, pool, task_queue, row)
        row.update(drain_s=round(time.monotonic() - t_drain))
        for group, topic in ((pipe.ingress_group, topics.raw), (pipe.router_group, topics.events)):
            await wait.eventually(
                functools.partial(h.caught_up, cluster.bootstrap, group, topic),
                120,
                f"group {group} to commit to the end of {topic}",
            )
        row.update(**dashboard.figures())
        for child in pipe.children:
            child.assert_alive()
    except BaseException:
        print(pipe.logs())
        raise
    finally:
        done.set()
        for task in (producing, sampling):
            if task is not None and not task.done():
                task.cancel()
        await pipe.close()
    row.update()  # final duration
    return dict(row)


async def _check(
    bootstrap: str,
    topics: Topics,
    aid: str,
    stream: Stream,
    temporal: Any,
    pool: asyncpg.Pool,
    task_queue: str,
    row: h.Figures,
) -> None:
    """Measure everything into ``row`` first, then assert."""
    raw = {(m.partition, m.offset): m for m in await kafka.read_all(bootstrap, topics.raw)}
    changed = [c for c, v in stream.acked.items() if c not in raw or raw[c].value != v]
    row.update(events=len(raw), acked_lost=len(changed), producer_retries=stream.retries)
    good = [c for c, m in raw.items() if not m.value.startswith(BAD_PREFIX)]
    bad = set(raw) - set(good)
    expected = h.expected_workflow_ids([aid], topics.raw, good)
    outcome = await h.measure(
        temporal, pool, task_queue, expected, timeout=h.scaled(300, h.drain_seconds(len(good)))
    )
    row.update(**outcome.figures())
    events = Counter(
        orjson.loads(m.value)["event_id"] for m in await kafka.read_all(bootstrap, topics.events)
    )
    want = {ids.source_event_id(topics.raw, p, o) for p, o in good}
    dlq = Counter(_dlq_source(m) for m in await kafka.read_all(bootstrap, topics.dlq))
    row.update(
        dlq=len(dlq),
        dlq_expected=len(bad),
        event_copies=sum(events.values()) - len(events),
        dlq_copies=sum(dlq.values()) - len(dlq),
    )
    delays = await _route_delays(temporal, task_queue, aid, topics.raw, raw, good)
    worst = max(delays, key=lambda pair: pair[1])
    row.update(
        stall_s=round(worst[1], 1),
        stall_at=time.strftime("%H:%M:%S", time.localtime(worst[0])),
        route_p50_s=round(statistics.median(d for _, d in delays), 2),
    )

    assert not changed, f"{len(changed)} acknowledged writes lost or changed, e.g. {changed[:3]}"
    outcome.check()
    assert set(events) == want, f"events topic: {len(want - set(events))} missing"
    assert set(dlq) == bad, f"DLQ: missing {bad - set(dlq)}, unexpected {set(dlq) - bad}"


def _dlq_source(msg: Any) -> tuple[int, int]:
    """The raw (partition, offset) a DLQ entry names."""
    part = header(msg.headers, "dlq_source_partition")
    off = header(msg.headers, "dlq_source_offset")
    assert part is not None and off is not None, f"DLQ entry without its source: {msg.headers}"
    return int(part), int(off)


async def _route_delays(
    temporal: Any,
    task_queue: str,
    aid: str,
    raw_topic: str,
    raw: dict[tuple[int, int], Any],
    good: list[tuple[int, int]],
) -> list[tuple[float, float]]:
    """Per good raw message appended after the first start: (its append time to the raw
    topic, seconds until its workflow started)."""
    produced = {
        ids.event_workflow_id(aid, ids.source_event_id(raw_topic, p, o)): raw[(p, o)].timestamp
        for p, o in good
    }
    query = f"TaskQueue = '{task_queue}' AND WorkflowType = 'RunActivityWorkflow'"
    started = {w.id: w.start_time.timestamp() async for w in temporal.list_workflows(query)}
    # Only events appended once the pipeline was flowing (its first start): the
    # first ones also wait for the processes to start and join their groups.
    flowing = min(started.values())
    return [
        (ts / 1000, max(0.0, started[wid] - ts / 1000))
        for wid, ts in produced.items()
        if ts / 1000 >= flowing
    ]
