"""latency: p50/p99 from produce to "workflow started" (Temporal's own start time) with the
live router fed at half the measured raw start ceiling."""

from __future__ import annotations

import asyncio
import os
import time
import uuid

from bench import baselines
from bench.cli import parse_args
from bench.common import drop_env, event, make_env, seed_activity, verdict, wait_until, write_result
from pipeline import kafka
from pipeline.runtime import Shutdown
from router.service import Router
from router.settings import RouterSettings
from schemas import ids

NAME = "latency"
TARGET_P99_MS = 250.0


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank; ``bench.latency_raw`` uses it too)."""
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


async def run(ceiling: float | None = None) -> dict[str, object]:
    seconds = float(os.environ.get("BENCH_LATENCY_SECONDS", "20"))
    env = await make_env(NAME)
    try:
        if ceiling is None:
            raw = await baselines.start_ceiling(env.client, env.cfg.temporal.task_queue, 600)
            ceiling = float(raw["ceiling"])  # type: ignore[arg-type]
        rate = ceiling / 2
        n = max(50, int(rate * seconds))
        aid = await seed_activity(env.pool, "bench.lat")
        tag = uuid.uuid4().hex[:8]
        shutdown = Shutdown()
        router = Router(
            env.cfg,
            RouterSettings(group=f"bench-{tag}", commit_interval_ms=200),
            client=env.client,
            pool=env.pool,
            shutdown=shutdown,
        )
        task = asyncio.create_task(router.run())
        await wait_until(
            lambda: router.ready and bool(router.consumer and router.consumer.assignment()),
            60,
            "router partition assignment",
        )
        await asyncio.sleep(1.0)
        sent: dict[str, float] = {}
        producer = kafka.producer(env.cfg.kafka, linger_ms=0)
        await producer.start()
        try:
            t0 = time.perf_counter()
            for i in range(n):
                due = t0 + i / rate
                delay = due - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                eid = f"{tag}-{i}"
                fut = await producer.send(
                    env.cfg.kafka.events_topic, event("bench.lat", eid, i), key=eid.encode()
                )
                sent[eid] = time.time()
                fut.add_done_callback(lambda _f: None)
            await producer.flush()
            achieved = n / (time.perf_counter() - t0)
            await wait_until(
                lambda: router.routing is not None and router.routing.stats.started >= n,
                120,
                "all latency events started",
            )
        finally:
            await producer.stop()
            shutdown.trigger()
            await asyncio.wait_for(task, 60)
        sem = asyncio.Semaphore(32)

        async def latency(eid: str) -> float:
            async with sem:
                desc = await env.client.get_workflow_handle(
                    ids.event_workflow_id(aid, eid)
                ).describe()
            return (desc.start_time.timestamp() - sent[eid]) * 1000

        lat = await asyncio.gather(*(latency(e) for e in sent))
    finally:
        await drop_env(env)
    p50, p99 = percentile(lat, 0.50), percentile(lat, 0.99)
    figures: dict[str, object] = {
        "raw_ceiling_per_second": ceiling,
        "target_rate_per_second": round(rate, 1),
        "achieved_rate_per_second": round(achieved, 1),
        "events": n,
        "p50_ms": round(p50, 1),
        "p90_ms": round(percentile(lat, 0.90), 1),
        "p99_ms": round(p99, 1),
        "max_ms": round(max(lat), 1),
        "target_p99_ms": TARGET_P99_MS,
    }
    write_result(NAME, figures)
    print(f"{n} events at {achieved:.0f}/s (half of the {ceiling:.0f}/s raw ceiling)")
    print(f"produce -> started: p50 {p50:.0f} ms, p90 {figures['p90_ms']} ms, p99 {p99:.0f} ms")
    print(verdict(f"{NAME} p99", p99, TARGET_P99_MS, at_most=True, unit=" ms"))
    return figures


if __name__ == "__main__":
    parse_args(
        __doc__,
        {"BENCH_LATENCY_SECONDS": "how long events are fed (default 20)"},
    )
    asyncio.run(run())
