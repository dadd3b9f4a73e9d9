"""SIGKILL the router while throttled runs wait for their start (issue 23, Durability).

A burst of events for an activity throttled at 2 starts/s (4 at full size): the router
decides a slot per run (flow_decisions) and starts each at once with a ``start_delay``, so most runs
are waiting inside Temporal when the router dies. The restarted router re-reads what
was not committed: every re-read trigger finds its decision and reuses it (Temporal
answers already-started), so no run is lost, none is started twice, and no second
GCRA slot is taken: the runs' start times are one interval apart at least, and the
throttle's TAT is one interval past the last of them.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import uuid

import pytest

from tests.faults import harness as h
from tests.support import db
from tests.support.wait import eventually

N = h.events("flow_throttle_kill", 40)
KILLS = h.scaled(2, 5)
LIMIT, PERIOD = h.scaled(2, 4), 1.0
T = PERIOD / LIMIT
PRODUCE_SECONDS = h.scaled(4, 20)


@pytest.mark.timeout(h.scaled(300, h.drain_seconds(N) + 900))
async def test_router_sigkill_while_runs_are_throttled(
    stack, cfg, topics, task_queue, temporal, db_pool, fault
):
    etype = f"fault.throttle.{uuid.uuid4().hex[:8]}"
    aid = await db.seed_activity(
        db_pool, etype, flow={"throttle": {"limit": LIMIT, "period": PERIOD}}
    )
    ep = h.Endpoints(stack.kafka, stack.temporal, cfg.database.url.get_secret_value())
    pipe = fault.pipeline(ep, topics, task_queue)
    figures = fault.figures("router SIGKILL, throttled runs", events=N, dlq=0, dlq_expected=0)
    produced = h.Produced()
    await pipe.spawn("ingress")
    await pipe.spawn("worker")
    # Without the ledger every re-read trigger reaches the flow gate (not only those
    # whose ledger row the kill lost), and with commits 3 s apart each kill leaves
    # decided but uncommitted triggers to re-read: the recorded decision is all that
    # stops a second slot.
    router = await pipe.spawn(
        "router",
        metrics=True,
        INGEST_ROUTER_LEDGER="false",
        INGEST_ROUTER_COMMIT_INTERVAL_MS="3000",
    )
    producing = asyncio.create_task(
        h.produce_paced(stack.kafka, topics.raw, N, etype, PRODUCE_SECONDS, produced, batch=10)
    )
    waiting_at_kills = []
    for kill in range(KILLS):

        async def deciding(router: h.Child = router) -> bool:
            router.assert_alive()
            n = await db_pool.fetchval("SELECT count(*) FROM flow_decisions")
            return n > 0 and await router.ready()

        await eventually(deciding, 90, "the router to be up and deciding")
        await asyncio.sleep(random.uniform(0.2, 1.0))
        await router.kill()
        waiting_at_kills.append(
            await db_pool.fetchval("SELECT count(*) FROM flow_decisions WHERE start_at > now()")
        )
        router = await pipe.restart(router)
        figures.update(kills=kill + 1, restarts=kill + 1)
    figures.update(waiting_at_kills=waiting_at_kills)
    await producing
    expected = h.expected_workflow_ids([aid], topics.raw, produced.coords)
    await pipe.verify(temporal, db_pool, expected, figures, reduced_timeout=240)
    await pipe.committed_to_end("router", 60)
    # The first kill lands while runs wait (later ones usually do too: see the figures).
    assert waiting_at_kills[0] > 0, "the first kill should land while runs wait"
    # One decision, and one GCRA slot, per run: none taken again by a re-read trigger.
    starts = [
        r["start_at"]
        for r in await db_pool.fetch(
            "SELECT start_at FROM flow_decisions WHERE activity_id = $1::uuid ORDER BY 1", aid
        )
    ]
    taken = await db_pool.fetchval("SELECT taken FROM flow_gcra WHERE activity_id = $1::uuid", aid)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(starts)]
    figures.update(decisions=len(starts), slots_taken=taken, min_gap=round(min(gaps), 3))
    assert (len(starts), taken) == (N, N)
    assert min(gaps) >= T - 1e-3
