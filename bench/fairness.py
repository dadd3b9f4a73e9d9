"""fairness: how long a small tenant waits behind a flooding one, with ``flow.fairness``
and without it, in one run on the real Temporal server.

A private real server (``bench.e2e.servers``: ``go.temporal.io/server`` 1.31 on the
stack's PostgreSQL, 4 shards, one process) is started with the stack's dynamic config,
which turns on ``matching.enableFairness``; the router and the production worker run in
this process against it. Two activities of one ``noop`` task each, on one task queue:

* ``plain``: no flow block (its runs carry no fairness key: first in, first out);
* ``fair``: ``fairness: {key: data.tenant}`` (each tenant's runs, their children and
  activities carry the tenant as Temporal's fairness key, weight 1).

Per activity, in turn (the second starts once the first fully drained): the flood,
``BENCH_FAIRNESS_FLOOD`` events (default 2,000) of tenant ``big``, is produced to the
events topic; right after it, ``BENCH_FAIRNESS_SMALL`` events (default 20) for each of
3 other tenants. The router starts them as it reads them (the flood first, it is first
in the partitions), far faster than the worker finishes them, so they queue in
Temporal's matching: that queue is what fairness orders.

Figures per activity: the flood's drain time (its first produce to its last run's
``finished_at``); each small run's time to finish (``finished_at`` minus the moment its
event was acknowledged by Kafka), p50 and max, and the same as a fraction of the
flood's drain time; how much of the flood had finished when the last small run did.
The last line: the small tenants' p50 without fairness / with it (how many times
sooner they finish; target >= 2).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

from bench.cli import parse_args
from bench.common import Env, drop_env, make_env, start_worker, started_producer, write_result
from bench.common import verdict as verdict_line
from bench.e2e.servers import target
from definitions import store
from pipeline.runtime import Shutdown
from pipeline.settings import load_settings
from router.service import Router
from router.settings import RouterSettings
from schemas.definitions import ActivityDef
from workers.parts import core_part

NAME = "fairness"
TARGET = 2.0
BIG = "big"
SMALL = ("t1", "t2", "t3")
MODES: dict[str, dict[str, Any] | None] = {
    "plain": None,
    "fair": {"fairness": {"key": "data.tenant"}},
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


def _record(etype: str, tenant: str, eid: str, i: int) -> tuple[bytes, bytes]:
    doc = {"type": etype, "source": "bench", "event_id": eid, "data": {"tenant": tenant, "n": i}}
    return eid.encode(), orjson.dumps(doc)


async def _finished(env: Env, activity_id: str) -> int:
    return int(
        await env.pool.fetchval(
            "SELECT count(*) FROM activity_runs WHERE activity_id = $1::uuid"
            " AND finished_at IS NOT NULL",
            activity_id,
        )
    )


def _q(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def phase(
    env: Env, mode: str, etype: str, aid: str, flood: int, small: int, router: asyncio.Task[Any]
) -> dict[str, Any]:
    """One activity's flood then small tenants; figures from ``activity_runs``."""
    tag = uuid.uuid4().hex[:8]
    topic = env.cfg.kafka.events_topic
    flood_records = [_record(etype, BIG, f"{tag}-{BIG}-{i}", i) for i in range(flood)]
    small_records = [
        _record(etype, t, f"{tag}-{t}-{i}", i) for i in range(small) for t in SMALL
    ]  # interleaved: t1, t2, t3, t1, ...
    async with started_producer(env.cfg.kafka) as producer:
        t_flood = time.time()
        futs = [await producer.send(topic, v, key=k) for k, v in flood_records]
        await asyncio.gather(*futs)
        futs = [await producer.send(topic, v, key=k) for k, v in small_records]
        await asyncio.gather(*futs)
        t_small = time.time()
    total = flood + small * len(SMALL)
    deadline = time.monotonic() + 120 + flood  # far above 1 run/s
    while (done := await _finished(env, aid)) < total:
        if router.done():
            raise RuntimeError(f"{mode}: the router stopped: {router.exception()!r}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{mode}: {done} of {total} runs finished")
        await asyncio.sleep(0.5)
    rows = await env.pool.fetch(
        "SELECT event_id, status, finished_at FROM activity_runs WHERE activity_id = $1::uuid",
        aid,
    )
    assert {r["status"] for r in rows} == {"succeeded"}, {r["status"] for r in rows}
    ends: dict[str, list[float]] = {}
    for r in rows:
        tenant = r["event_id"].split("-")[1]
        ends.setdefault(tenant, []).append(r["finished_at"].timestamp())
    drain = max(ends[BIG]) - t_flood
    waits = sorted(e - t_small for t in SMALL for e in ends[t])
    last_small = t_small + waits[-1]
    flood_done = sum(e <= last_small for e in ends[BIG]) / flood
    per_tenant = {t: round(max(ends[t]) - t_small, 2) for t in SMALL}
    return {
        "mode": mode,
        "flow": MODES[mode],
        "flood": flood,
        "small_per_tenant": small,
        "flood_drain_s": round(drain, 2),
        "flood_runs_per_s": round(flood / drain, 2),
        "small_p50_s": round(statistics.median(waits), 2),
        "small_p90_s": round(_q(waits, 0.9), 2),
        "small_max_s": round(waits[-1], 2),
        "small_max_s_per_tenant": per_tenant,
        "small_p50_of_drain": round(statistics.median(waits) / drain, 3),
        "small_max_of_drain": round(waits[-1] / drain, 3),
        "flood_done_when_last_small_done": round(flood_done, 3),
        "small_produced_after_flood_s": round(t_small - t_flood, 2),
    }


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parent,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parent,
        ).stdout.strip()
        return out.stdout.strip() + ("+uncommitted" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


async def run(flood: int | None = None, small: int | None = None) -> dict[str, Any]:
    flood = flood or int(os.environ.get("BENCH_FAIRNESS_FLOOD", "2000"))
    small = small or int(os.environ.get("BENCH_FAIRNESS_SMALL", "20"))
    order = os.environ.get("BENCH_FAIRNESS_ORDER", "plain,fair").split(",")
    base = load_settings()
    async with target(
        "server",
        address=base.temporal.address,
        namespace=base.temporal.namespace,
        pg_url=base.database.url.get_secret_value(),
        shards=int(os.environ.get("BENCH_FAIRNESS_SHARDS", "4")),
        shape="single",
    ) as server:
        env = await make_env(NAME, temporal_address=server.address)
        # Both activities before the router starts: its catalog refreshes every 10 s, an
        # activity created later would miss its first events.
        etypes = {mode: f"bench.fair.{mode}.{env.tag}" for mode in order}
        aids = {mode: await _activity(env, etypes[mode], MODES[mode]) for mode in order}
        worker, stop_worker = start_worker(env, (core_part,))
        stop_router = Shutdown()
        router = Router(
            env.cfg,
            RouterSettings(group=f"bench-{env.tag}", commit_interval_ms=200),
            client=env.client,
            pool=env.pool,
            shutdown=stop_router,
        )
        routing = asyncio.create_task(router.run())
        try:
            results = {
                mode: await phase(env, mode, etypes[mode], aids[mode], flood, small, routing)
                for mode in order
            }
        finally:
            stop_router.trigger()
            await asyncio.wait_for(routing, 60)
            stop_worker.trigger()
            await worker
            await drop_env(env)
    plain, fair = results["plain"], results["fair"]
    ratio = plain["small_p50_s"] / fair["small_p50_s"]
    figures = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": _commit(),
        "server": server.label(),
        "cores": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "order": order,
        "results": results,
        "ratio": round(ratio, 2),
        "max_ratio": round(plain["small_max_s"] / fair["small_max_s"], 2),
        "target": TARGET,
    }
    write_result(NAME, figures)
    for mode in order:
        r = results[mode]
        print(
            f"{mode:>5}: flood of {flood} drained in {r['flood_drain_s']} s "
            f"({r['flood_runs_per_s']} runs/s); 3 x {small} small runs finished "
            f"p50 {r['small_p50_s']} s / max {r['small_max_s']} s after their produce "
            f"({r['small_p50_of_drain']:.0%} / {r['small_max_of_drain']:.0%} of the drain); "
            f"{r['flood_done_when_last_small_done']:.0%} of the flood done by then"
        )
    print(f"small tenants' max: x{figures['max_ratio']} sooner with fairness")
    print(verdict_line(f"{NAME} (small p50 plain / fair)", ratio, TARGET))
    return figures


if __name__ == "__main__":
    parse_args(
        __doc__,
        {
            "BENCH_FAIRNESS_FLOOD": "events of the flooding tenant per activity (default 2000)",
            "BENCH_FAIRNESS_SMALL": "events of each of the 3 small tenants (default 20)",
            "BENCH_FAIRNESS_ORDER": "the activities in the order measured (default plain,fair)",
            "BENCH_FAIRNESS_SHARDS": "history shards of the private real server (default 4)",
        },
    )
    asyncio.run(run())
