"""router_fresh: events/s the live router turns into fresh starts ÷ raw start_workflow ceiling.

Both rates are steady-state: first start to last start (the router's consumer-group
join, ~3 s on a fresh group, is reported separately, not counted).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid

from bench import baselines
from bench.cli import parse_args
from bench.common import (
    Env,
    Sampler,
    drop_env,
    event,
    make_env,
    produce,
    seed_activity,
    verdict,
    wait_until,
    write_result,
)
from pipeline.runtime import Shutdown
from router.service import Router
from router.settings import RouterSettings

NAME = "router_fresh"
TARGET = 0.9


async def route_fresh(env: Env, n: int) -> dict[str, object]:
    """Produce ``n`` events, run the live Router until all are started; figures + series."""
    await seed_activity(env.pool, "bench.fresh")
    tag = uuid.uuid4().hex[:8]
    await produce(
        env.cfg.kafka,
        env.cfg.kafka.events_topic,
        [(f"{tag}-{i}".encode(), event("bench.fresh", f"{tag}-{i}", i)) for i in range(n)],
    )
    rcfg = RouterSettings(group=f"bench-{tag}")
    shutdown = Shutdown()
    router = Router(env.cfg, rcfg, client=env.client, pool=env.pool, shutdown=shutdown)

    def started() -> int:
        return router.routing.stats.started if router.routing else 0

    sampler = Sampler(started)
    marks: dict[str, float] = {}

    def first_then_all() -> bool:
        s = started()
        if s and "first" not in marks:
            marks["first"] = time.perf_counter()
        return s >= n

    t0 = time.perf_counter()
    task = asyncio.create_task(router.run())
    sampler.start()
    try:
        await wait_until(first_then_all, 600, f"{n} router starts")
        marks["last"] = time.perf_counter()
    finally:
        shutdown.trigger()
        await asyncio.wait_for(task, 60)
        series = await sampler.stop()
    steady = (n - 1) / (marks["last"] - marks["first"])
    return {
        "events": n,
        "router_concurrency": rcfg.concurrency,
        "startup_seconds": round(marks["first"] - t0, 2),
        "end_to_end_per_second": round(n / (marks["last"] - t0), 1),
        "steady_per_second": round(steady, 1),
        "series": series,
    }


async def run(n: int | None = None) -> dict[str, object]:
    n = n or int(os.environ.get("BENCH_ROUTER_EVENTS", "3000"))
    env = await make_env(NAME)
    try:
        raw = await baselines.start_ceiling(
            env.client, env.cfg.temporal.task_queue, int(os.environ.get("BENCH_RAW_STARTS", "1000"))
        )
        routed = await route_fresh(env, n)
    finally:
        await drop_env(env)
    ratio = float(routed["steady_per_second"]) / float(raw["ceiling"])  # type: ignore[arg-type]
    figures = {"raw_start": raw, "router": routed, "ratio": round(ratio, 3), "target": TARGET}
    write_result(NAME, figures)
    print(f"raw start_workflow per concurrency: {raw['per_concurrency']} (starts/s)")
    print(
        f"router: {routed['steady_per_second']} starts/s steady, "
        f"{routed['end_to_end_per_second']}/s end to end (startup {routed['startup_seconds']}s)"
    )
    print(verdict(NAME, ratio, TARGET))
    return figures


if __name__ == "__main__":
    parse_args(
        __doc__,
        {
            "BENCH_ROUTER_EVENTS": "events the router turns into starts (default 3000)",
            "BENCH_RAW_STARTS": "direct starts for the raw ceiling (default 1000)",
        },
    )
    asyncio.run(run())
