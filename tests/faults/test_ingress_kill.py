"""Scenario 2: SIGKILL ingress repeatedly while events flow; stamped ids stay stable.

Each raw offset maps to exactly one event_id, ``source_event_id(raw, partition,
offset)``; redelivered copies on the events topic carry the identical id; no raw
offset is missing. Then the invariant downstream (router and worker run too).
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections import defaultdict

import orjson
import pytest

from schemas import ids
from tests import helpers
from tests.faults import harness as h

N = h.scaled(300, 10000)
KILLS = h.scaled(3, 10)
PRODUCE_SECONDS = h.scaled(45, 200)  # each kill costs a ~10 s rebalance


async def _events_count(bootstrap: str, topic: str) -> int:
    return sum((await helpers.end_offsets(bootstrap, topic)).values())


@pytest.mark.timeout(h.scaled(600, h.drain_seconds(N) + 900))
async def test_ingress_sigkill_keeps_ids_stable(
    stack, cfg, topics, task_queue, temporal, db_pool, tmp_path
):
    t0 = time.monotonic()
    etype = f"fault.ingress.{uuid.uuid4().hex[:8]}"
    aid = await helpers.seed_activity(db_pool, etype)
    ep = h.Endpoints(stack.kafka, stack.temporal, cfg.database.url.get_secret_value())
    pipe = h.Pipeline(tmp_path, ep, topics, task_queue)
    produced = h.Produced()
    kills = 0
    try:
        await pipe.spawn("router")
        await pipe.spawn("worker")
        # The test-only pre-commit pause widens the window between "produced" and
        # "committed", so kills land there and force redelivery of stamped events.
        ingress = await pipe.spawn("ingress", INGEST_INGRESS_FAULT_COMMIT_DELAY_SECONDS="2")
        producing = asyncio.create_task(
            h.produce_paced(stack.kafka, topics.raw, N, etype, PRODUCE_SECONDS, produced, batch=5)
        )
        for _ in range(KILLS):
            before = await _events_count(stack.kafka, topics.events)

            async def progressed(before: int = before, child: h.Child = ingress) -> bool:
                child.assert_alive()
                return await _events_count(stack.kafka, topics.events) > before

            await helpers.eventually(progressed, 90, "ingress to produce something")
            await asyncio.sleep(random.uniform(0.0, 0.5))
            assert not producing.done(), "every kill should land while events flow"
            await ingress.kill()
            kills += 1
            ingress = await pipe.restart(ingress)
        await producing
        assert len(produced.coords) == N
        await helpers.eventually(
            lambda: h.caught_up(stack.kafka, pipe.ingress_group, topics.raw),
            120,
            "ingress to commit to the end of the raw topic",
        )
        expected = h.expected_workflow_ids([aid], topics.raw, produced.coords)
        outcome = await h.verify(
            temporal, db_pool, task_queue, expected, timeout=h.scaled(420, h.drain_seconds(N))
        )
    except BaseException:
        print(pipe.logs())
        raise
    finally:
        await pipe.close()

    events = await helpers.read_all(stack.kafka, topics.events)
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
    redelivered = len(events) - N
    assert redelivered > 0, "no kill landed between produce and commit"
    assert await _events_count(stack.kafka, topics.dlq) == 0
    h.record(
        "2 ingress SIGKILL",
        events=N,
        kills=kills,
        restarts=kills,
        lost=outcome.lost,
        duplicate_runs=outcome.duplicate_runs + outcome.duplicate_executions,
        dlq=0,
        dlq_expected=0,
        runs=outcome.runs,
        seconds=round(time.monotonic() - t0),
        redelivered=redelivered,
    )
