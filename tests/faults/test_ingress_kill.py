"""Scenario 2: SIGKILL ingress repeatedly while events flow; stamped ids stay stable.

Each raw offset maps to exactly one event_id, ``source_event_id(raw, partition,
offset)``; redelivered copies on the events topic carry the identical id; no raw
offset is missing. Then the invariant downstream (router and worker run too).
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import defaultdict

import orjson
import pytest

from schemas import ids
from tests.faults import harness as h
from tests.support import db, kafka
from tests.support.wait import eventually

N = h.events("ingress_kill", 300)
KILLS = h.scaled(3, 10)
PRODUCE_SECONDS = h.scaled(45, 200)  # each kill costs a ~10 s rebalance


@pytest.mark.timeout(h.scaled(600, h.drain_seconds(N) + 900))
async def test_ingress_sigkill_keeps_ids_stable(
    stack, cfg, topics, task_queue, temporal, db_pool, fault
):
    etype = f"fault.ingress.{uuid.uuid4().hex[:8]}"
    aid = await db.seed_activity(db_pool, etype)
    ep = h.Endpoints(stack.kafka, stack.temporal, cfg.database.url.get_secret_value())
    pipe = fault.pipeline(ep, topics, task_queue)
    figures = fault.figures("2 ingress SIGKILL", events=N, dlq_expected=0)
    produced = h.Produced()
    await pipe.spawn("router")
    await pipe.spawn("worker")
    # The test-only pre-commit pause widens the window between "produced" and
    # "committed", so kills land there and force redelivery of stamped events.
    ingress = await pipe.spawn("ingress", INGEST_INGRESS_FAULT_COMMIT_DELAY_SECONDS="2")
    producing = asyncio.create_task(
        h.produce_paced(stack.kafka, topics.raw, N, etype, PRODUCE_SECONDS, produced, batch=5)
    )
    for kill in range(KILLS):
        before = await kafka.count(stack.kafka, topics.events)

        async def progressed(before: int = before, child: h.Child = ingress) -> bool:
            child.assert_alive()
            return await kafka.count(stack.kafka, topics.events) > before

        await eventually(progressed, 90, "ingress to produce something")
        await asyncio.sleep(random.uniform(0.0, 0.5))  # a random point mid-stream
        assert not producing.done(), "every kill should land while events flow"
        await ingress.kill()
        ingress = await pipe.restart(ingress)
        figures.update(kills=kill + 1, restarts=kill + 1)
    await producing
    assert len(produced.coords) == N
    await pipe.committed_to_end("ingress", 120)
    expected = h.expected_workflow_ids([aid], topics.raw, produced.coords)
    events = await kafka.read_all(stack.kafka, topics.events)
    figures.update(redelivered=len(events) - N, dlq=await kafka.count(stack.kafka, topics.dlq))
    await pipe.verify(temporal, db_pool, expected, figures, reduced_timeout=420)
    await fault.close()

    by_source: dict[tuple[int, int], set[str]] = defaultdict(set)
    copies: dict[str, set[tuple[int, bytes]]] = defaultdict(set)
    for m in events:
        src = dict(m.headers)["ingress_source"].decode()
        topic, part, off = src.rsplit("/", 2)
        assert topic == topics.raw
        eid = orjson.loads(m.value)["event_id"]
        by_source[(int(part), int(off))].add(eid)
        copies[eid].add((m.partition, m.value))
    assert set(by_source) == set(produced.coords), "a raw offset never reached the events topic"
    for (p, o), eids in by_source.items():
        assert eids == {ids.source_event_id(topics.raw, p, o)}, (p, o, eids)
    assert all(len(c) == 1 for c in copies.values()), "a duplicate differs from its original"
    assert len(events) > N, "no kill landed between produce and commit"
    assert figures["dlq"] == 0
