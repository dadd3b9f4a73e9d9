"""Scenarios 11-13: broker failover on a private 3-broker KRaft cluster (issue 16).

The pipeline (ingress, router, worker as real processes) runs against three
brokers (RF 3, min.insync.replicas=2, unclean leader election off) while a
stream flows; the checks and figures are in ``tests/faults/failover.py``.

11. **Leader SIGKILL.** The broker leading the most partitions of the events
    topic is SIGKILLed mid-stream and restarted 10 s later (3 times at full size,
    at least 2,000 events).
12. **Coordinator SIGKILL.** The broker coordinating the router's consumer
    group is SIGKILLed mid-stream and restarted.
13. **Rolling restart.** Each broker in turn is SIGTERMed, waited for, started
    again, and its replicas allowed back in sync, the way an operator upgrades.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from devstack.kafka_inspect import coordinator, leaders

from tests.faults import harness as h
from tests.faults.cluster import all_in_sync
from tests.faults.failover import Ctx, Fault, run

DOWN = 10  # seconds a SIGKILLed broker stays down
KILLS = h.scaled(1, 3)
RATE = h.scaled(2, 20)  # raw events per second while the faults go on
TIMEOUT = h.scaled(300, h.drain_seconds(4000) + 900)


async def _kill_and_restart(ctx: Ctx, node: int) -> None:
    ctx.dashboard.fault = True
    ctx.dashboard.mark(f"SIGKILL node {node}")
    await asyncio.to_thread(ctx.cluster.kill, node)
    await asyncio.sleep(DOWN)
    ctx.dashboard.mark(f"start node {node}")
    await asyncio.to_thread(ctx.cluster.start, node)
    ctx.dashboard.mark(f"node {node} answers")
    await all_in_sync(ctx.cluster)
    ctx.dashboard.mark("all replicas in sync")
    ctx.dashboard.fault = False


async def _leader_kills(ctx: Ctx) -> dict[str, Any]:
    victims = []
    for _ in range(KILLS):
        await ctx.routing_progressed()
        led = Counter((await leaders(ctx.cluster.bootstrap, ctx.topics.events)).values())
        node, count = led.most_common(1)[0]
        victims.append(f"{node}({count})")
        await _kill_and_restart(ctx, node)
    await ctx.routing_progressed()  # still flowing after the last restart
    return {"kills": KILLS, "restarts": KILLS, "victims": "+".join(victims)}


async def _coordinator_kill(ctx: Ctx) -> dict[str, Any]:
    await ctx.routing_progressed()
    node = await coordinator(ctx.cluster.bootstrap, ctx.pipe.router_group)
    led = list((await leaders(ctx.cluster.bootstrap, ctx.topics.events)).values()).count(node)
    await _kill_and_restart(ctx, node)
    moved = await coordinator(ctx.cluster.bootstrap, ctx.pipe.router_group)
    await ctx.routing_progressed()
    return {"kills": 1, "restarts": 1, "victims": f"{node}({led})", "coordinator_after": moved}


async def _rolling_restart(ctx: Ctx) -> dict[str, Any]:
    stops = []
    for node in ctx.cluster.nodes:
        await ctx.routing_progressed()
        ctx.dashboard.fault = True
        ctx.dashboard.mark(f"SIGTERM node {node.node_id}")
        stops.append(await asyncio.to_thread(ctx.cluster.terminate, node.node_id))
        ctx.dashboard.mark(f"node {node.node_id} exited; starting it")
        await asyncio.to_thread(ctx.cluster.start, node.node_id)
        ctx.dashboard.mark(f"node {node.node_id} answers")
        await all_in_sync(ctx.cluster)
        ctx.dashboard.mark("all replicas in sync")
        ctx.dashboard.fault = False
    await ctx.routing_progressed()
    return {"kills": 0, "restarts": len(stops), "sigterm_max_s": round(max(stops), 1)}


SCENARIOS = [
    pytest.param("11 Kafka leader SIGKILL", _leader_kills, h.scaled(40, 2000), id="leader-sigkill"),
    pytest.param(
        "12 Kafka coordinator SIGKILL", _coordinator_kill, h.scaled(40, 1000), id="coordinator"
    ),
    pytest.param("13 Kafka rolling restart", _rolling_restart, h.scaled(40, 1500), id="rolling"),
]


@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize(("scenario", "fault", "min_events"), SCENARIOS)
async def test_broker_failover(
    scenario: str,
    fault: Fault,
    min_events: int,
    stack,
    kafka_cluster,
    cluster_topics,
    database_url,
    db_pool,
    task_queue,
    temporal,
    tmp_path,
):
    figures = await run(
        scenario,
        fault,
        cluster=kafka_cluster,
        temporal_address=stack.temporal,
        database_url=database_url,
        topics=cluster_topics,
        task_queue=task_queue,
        temporal=temporal,
        pool=db_pool,
        tmp=tmp_path,
        min_events=min_events,
        rate=RATE,
    )
    assert (figures["lost"], figures["duplicate_runs"], figures["acked_lost"]) == (0, 0, 0)
