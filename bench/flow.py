"""flow: what an activity's ``flow`` block costs the router, and how exact the throttle is.

* overhead: the live router (in-process, no worker: starts are what is measured)
  routes ``BENCH_FLOW_EVENTS`` fresh events for an activity with a ``throttle``
  whose limit is never reached, and the same number for the same activity shape
  without one; each round on a fresh events topic, the cases interleaved over
  ``BENCH_FLOW_ROUNDS`` rounds so drift hits both. Figure: steady starts/s (first to
  last start), median over rounds; the last line is the ratio (case / plain,
  target >= 0.9). Every case in :data:`CASES` is measured the same way.
* accuracy: ``BENCH_FLOW_BURST`` events in one burst for a throttle of
  ``BENCH_FLOW_LIMIT`` starts per second (burst 1). When Temporal let each run go
  (its first WorkflowTaskScheduled event, after the start delay) against the GCRA
  schedule: the achieved rate / the limit, the most starts in any one-second window,
  and how late Temporal fired the delayed starts (p50, max).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import uuid
from datetime import UTC
from typing import Any

from temporalio.api.enums.v1 import EventType

from bench.cli import parse_args
from bench.common import (
    PARTITIONS,
    Env,
    drop_env,
    event,
    make_env,
    produce,
    verdict,
    wait_until,
    write_result,
)
from definitions import store
from pipeline.clients import ensure_topics
from pipeline.runtime import Shutdown
from router.service import Router
from router.settings import RouterSettings
from schemas.definitions import ActivityDef
from schemas.ids import event_workflow_id

NAME = "flow"
TARGET = 0.9
# The flow block of each measured case; None is the baseline. Limits are far above
# what the router reaches, so what is measured is the gate's cost, not its pacing.
CASES: dict[str, dict[str, Any] | None] = {
    "plain": None,
    "throttle": {"throttle": {"limit": 100_000, "period": "1s", "burst": 100_000}},
}


async def _activity(env: Env, event_type: str, flow: dict[str, Any] | None) -> str:
    aid = uuid.uuid4()
    doc: dict[str, Any] = {
        "id": aid,
        "name": f"bench {aid}",
        "trigger": {"type": "event", "event_type": event_type},
        "tasks": [{"type": "noop"}],
    }
    if flow is not None:
        doc["flow"] = flow
    await store.upsert(env.pool, [ActivityDef.model_validate(doc)])
    return str(aid)


async def _route(env: Env, flow: dict[str, Any] | None, n: int) -> tuple[float, str, list[str]]:
    """Route ``n`` fresh events of a new activity on a new topic; steady starts/s."""
    tag = uuid.uuid4().hex[:8]
    etype = f"bench.flow.{tag}"
    aid = await _activity(env, etype, flow)
    topic = f"bench-flow-{tag}"
    await ensure_topics(env.cfg.kafka, [topic], PARTITIONS)
    cfg = env.cfg.model_copy(
        update={"kafka": env.cfg.kafka.model_copy(update={"events_topic": topic})}
    )
    evs = [f"{tag}-{i}" for i in range(n)]
    await produce(cfg.kafka, topic, [(e.encode(), event(etype, e, i)) for i, e in enumerate(evs)])
    shutdown = Shutdown()
    router = Router(
        cfg,
        RouterSettings(group=f"bench-{tag}"),
        client=env.client,
        pool=env.pool,
        shutdown=shutdown,
    )
    marks: dict[str, float] = {}

    def first_then_all() -> bool:
        s = router.routing.stats.started if router.routing else 0
        if s and "first" not in marks:
            marks["first"] = time.perf_counter()
        return s >= n

    task = asyncio.create_task(router.run())
    try:
        await wait_until(first_then_all, 600, f"{n} router starts")
        marks["last"] = time.perf_counter()
    finally:
        shutdown.trigger()
        await asyncio.wait_for(task, 60)
    return (n - 1) / (marks["last"] - marks["first"]), aid, evs


async def overhead(env: Env, n: int, rounds: int) -> dict[str, Any]:
    rates: dict[str, list[float]] = {c: [] for c in CASES}
    for _ in range(rounds):
        for case, flow in CASES.items():
            rate, _, _ = await _route(env, flow, n)
            rates[case].append(rate)
    median = {c: statistics.median(r) for c, r in rates.items()}
    return {
        "events": n,
        "rounds": rounds,
        "starts_per_s": {c: [round(x, 1) for x in r] for c, r in rates.items()},
        "median_starts_per_s": {c: round(m, 1) for c, m in median.items()},
        "ratio": {c: round(m / median["plain"], 3) for c, m in median.items() if c != "plain"},
    }


async def _scheduled(env: Env, wid: str) -> float | None:
    async for e in env.client.get_workflow_handle(wid).fetch_history_events():
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
            return e.event_time.ToDatetime(tzinfo=UTC).timestamp()
    return None


async def accuracy(env: Env, n: int, limit: int) -> dict[str, Any]:
    flow = {"throttle": {"limit": limit, "period": "1s"}}
    _, aid, evs = await _route(env, flow, n)
    wids = [event_workflow_id(aid, e) for e in evs]
    planned = {
        r["workflow_id"]: r["start_at"].timestamp()
        for r in await env.pool.fetch(
            "SELECT workflow_id, start_at FROM flow_decisions WHERE workflow_id = ANY($1::text[])",
            wids,
        )
    }
    fired: dict[str, float] = {}
    deadline = time.monotonic() + n / limit + 120
    while len(fired) < n and time.monotonic() < deadline:
        for w in wids:
            if w not in fired and (at := await _scheduled(env, w)) is not None:
                fired[w] = at
        await asyncio.sleep(0.5)
    times = sorted(fired.values())
    window = max(sum(1 for u in times if t <= u < t + 1.0) for t in times)
    late = sorted(fired[w] - planned[w] for w in fired)
    rate = (len(times) - 1) / (times[-1] - times[0])
    return {
        "events": n,
        "limit_per_s": limit,
        "fired": len(fired),
        "achieved_per_s": round(rate, 2),
        "rate_ratio": round(rate / limit, 3),
        "max_in_any_1s_window": window,
        "late_p50_ms": round(statistics.median(late) * 1000, 1),
        "late_max_ms": round(late[-1] * 1000, 1),
        "early_max_ms": round(max(0.0, -late[0]) * 1000, 1),
    }


async def run() -> dict[str, Any]:
    n = int(os.environ.get("BENCH_FLOW_EVENTS", "1000"))
    rounds = int(os.environ.get("BENCH_FLOW_ROUNDS", "2"))
    burst = int(os.environ.get("BENCH_FLOW_BURST", "60"))
    limit = int(os.environ.get("BENCH_FLOW_LIMIT", "10"))
    env = await make_env(NAME)
    try:
        over = await overhead(env, n, rounds)
        acc = await accuracy(env, burst, limit)
    finally:
        await drop_env(env)
    ratio = over["ratio"]["throttle"]
    figures = {"overhead": over, "accuracy": acc, "ratio": ratio, "target": TARGET}
    write_result(NAME, figures)
    print(f"router starts/s, median of {rounds} rounds: {over['median_starts_per_s']}")
    print(
        f"throttle {limit}/s on a burst of {burst}: {acc['achieved_per_s']} starts/s "
        f"(x{acc['rate_ratio']} the limit), at most {acc['max_in_any_1s_window']} in any 1 s, "
        f"fired late by {acc['late_p50_ms']} ms p50 / {acc['late_max_ms']} ms max"
    )
    for case, r in over["ratio"].items():
        if case != "throttle":
            print(f"{case}: ratio {r} (case / plain)")
    print(verdict(NAME, ratio, TARGET))
    return figures


if __name__ == "__main__":
    parse_args(
        __doc__,
        {
            "BENCH_FLOW_EVENTS": "events per case and round for the overhead (default 1000)",
            "BENCH_FLOW_ROUNDS": "rounds of every case, interleaved (default 2)",
            "BENCH_FLOW_BURST": "events of the accuracy burst (default 60)",
            "BENCH_FLOW_LIMIT": "the accuracy throttle's starts per second (default 10)",
        },
    )
    asyncio.run(run())
