"""latency_raw: p50/p99 from produce on the *raw* topic to "workflow started" (Temporal's own
start time), through real ``ingest ingress`` and ``ingest router`` processes at half the raw
start ceiling, with ingress committing its offsets after every batch
(``INGEST_INGRESS_COMMIT_INTERVAL_MS=0``, the baseline) and at most every 500 ms (the
default). The two alternate, A B A B, in one run, each phase on topics and groups of its own;
the figure is the default's p99 as a ratio of the baseline's (issue 40: an interval must not
cost the path its latency). ``bench.latency`` measures the router's hop alone."""

from __future__ import annotations

import asyncio
import os
import time
import uuid

from temporalio.service import RPCError, RPCStatusCode

from bench import baselines
from bench.cli import parse_args
from bench.common import (
    PARTITIONS,
    RESULTS,
    Env,
    drop_env,
    event,
    make_env,
    process_env,
    seed_activity,
    spawn,
    stop,
    verdict,
    write_result,
)
from bench.latency import TARGET_P99_MS, percentile
from pipeline import kafka
from pipeline.clients import ensure_topics
from schemas import ids

NAME = "latency_raw"
INTERVALS_MS = (0, 500)  # baseline (after every batch), then the default
ROUNDS = 2
ETYPE = "bench.latraw"


async def _started(env: Env, wid: str, deadline: float) -> float:
    """Temporal's start time of ``wid``, polled until it exists (AssertionError at the deadline)."""
    while True:
        try:
            desc = await env.client.get_workflow_handle(wid).describe()
            return desc.start_time.timestamp()
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
        assert time.monotonic() < deadline, f"workflow {wid} never started"
        await asyncio.sleep(0.2)


async def _phase(env: Env, aid: str, interval_ms: int, rate: float, n: int) -> list[float]:
    """One phase: fresh topics and groups, ingress + router with ``interval_ms``, one warm-up
    event routed end to end, then ``n`` events paced at ``rate``; latencies in ms."""
    tag = f"{interval_ms}-{uuid.uuid4().hex[:6]}"
    raw, events = f"bench-latraw-raw-{tag}", f"bench-latraw-events-{tag}"
    await ensure_topics(env.cfg.kafka, [raw, events], PARTITIONS)
    environ = process_env(
        env.cfg, events_topic=events, task_queue=env.cfg.temporal.task_queue, group=f"lr-{tag}"
    )
    environ |= {"KAFKA_RAW_TOPIC": raw, "INGEST_INGRESS_COMMIT_INTERVAL_MS": str(interval_ms)}
    RESULTS.mkdir(parents=True, exist_ok=True)
    procs = [await spawn(k, environ, RESULTS / f"{NAME}-{k}.log") for k in ("ingress", "router")]
    producer = kafka.producer(env.cfg.kafka, linger_ms=0)
    await producer.start()
    sent: dict[str, float] = {}
    try:
        warm = f"{tag}-warm"
        await producer.send_and_wait(raw, event(ETYPE, warm, -1), key=warm.encode())
        await _started(env, ids.event_workflow_id(aid, warm), time.monotonic() + 120)
        await asyncio.sleep(2.0)  # the groups settle; the warm-up's commit goes out
        t0 = time.perf_counter()
        for i in range(n):
            delay = t0 + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            eid = f"{tag}-{i}"
            await producer.send(raw, event(ETYPE, eid, i), key=eid.encode())
            sent[eid] = time.time()
        await producer.flush()
        deadline = time.monotonic() + 120
        sem = asyncio.Semaphore(32)

        async def latency(eid: str) -> float:
            async with sem:
                start = await _started(env, ids.event_workflow_id(aid, eid), deadline)
            return (start - sent[eid]) * 1000

        return list(await asyncio.gather(*(latency(e) for e in sent)))
    finally:
        await producer.stop()
        codes = await stop(procs, kill_after=60)
        assert codes == [0, 0], f"ingress/router exited {codes} (logs: {RESULTS}/{NAME}-*.log)"


async def run() -> dict[str, object]:
    seconds = float(os.environ.get("BENCH_LATENCY_SECONDS", "20"))
    env = await make_env(NAME)
    try:
        raw = await baselines.start_ceiling(env.client, env.cfg.temporal.task_queue, 600)
        ceiling = float(raw["ceiling"])  # type: ignore[arg-type]
        rate = ceiling / 2
        n = max(50, int(rate * seconds))
        aid = await seed_activity(env.pool, ETYPE)  # before the routers read the catalog
        lat: dict[int, list[float]] = {ms: [] for ms in INTERVALS_MS}
        phases: list[str] = []
        for r in range(ROUNDS):
            for ms in INTERVALS_MS:
                values = await _phase(env, aid, ms, rate, n)
                lat[ms] += values
                phases.append(f"round {r + 1}, {ms} ms: p99 {percentile(values, 0.99):.0f} ms")
                print(phases[-1], flush=True)
    finally:
        await drop_env(env)
    figures: dict[str, object] = {
        "raw_ceiling_per_second": ceiling,
        "rate_per_second": round(rate, 1),
        "events_per_phase": n,
        "rounds": ROUNDS,
        "phases": phases,
        "target_p99_ms": TARGET_P99_MS,
    }
    for ms, values in lat.items():
        p50, p99 = percentile(values, 0.50), percentile(values, 0.99)
        figures[f"commit_{ms}ms"] = {"p50_ms": round(p50, 1), "p99_ms": round(p99, 1)}
        print(
            f"ingress commits every {ms} ms: {len(values)} events, produce -> started "
            f"p50 {p50:.0f} ms, p99 {p99:.0f} ms"
        )
    base, new = (percentile(lat[ms], 0.99) for ms in INTERVALS_MS)
    figures["p99_ratio"] = round(new / base, 3)
    write_result(NAME, figures)
    print(f"{n} events per phase at {rate:.0f}/s (half of the {ceiling:.0f}/s raw ceiling)")
    print(verdict(f"{NAME} p99 (500 ms commits)", new, TARGET_P99_MS, at_most=True, unit=" ms"))
    print(f"{NAME} p99 ratio, 500 ms commits / commits after every batch: {new / base:.3f}")
    return figures


if __name__ == "__main__":
    parse_args(__doc__, {"BENCH_LATENCY_SECONDS": "how long events are fed per phase (20)"})
    asyncio.run(run())
