"""scale: 3 routers in one group + 2 workers against 1 router + 1 worker, in the same run.

Each layout runs as real ``ingest router`` / ``ingest worker`` processes on its own
events topic (3 partitions, so 3 routers each own one) and its own task queue. The
figure is completed runs per second: from the first event produced to the last
``activity_runs`` row reaching ``succeeded``, so it covers routing, the workflow,
``start_run``, the task child and the run's finish. The last line is the speed-up
ratio (scaled / single). On 2 cores every process shares the same CPUs as Kafka,
Temporal and PostgreSQL, so this measures contention as much as scale-out; see the
README for what would scale on a bigger machine.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid

from bench.cli import parse_args
from bench.common import (
    Env,
    drop_env,
    event,
    make_env,
    process_env,
    produce,
    seed_activity,
    spawn,
    stop,
    write_result,
)
from pipeline.clients import ensure_topics

NAME = "scale"


async def layout(env: Env, routers: int, workers: int, n: int) -> dict[str, object]:
    tag = uuid.uuid4().hex[:8]
    topic, queue, etype = f"bench-scale-{tag}", f"bench-scale-{tag}", f"bench.scale.{tag}"
    await ensure_topics(env.cfg.kafka, [topic], 3)
    aid = await seed_activity(env.pool, etype)
    environ = process_env(env.cfg, events_topic=topic, task_queue=queue, group=f"scale-{tag}")
    procs = [await spawn("router", environ) for _ in range(routers)]
    procs += [await spawn("worker", environ) for _ in range(workers)]
    try:
        await asyncio.sleep(8)  # processes import, connect and join the group
        t0 = time.perf_counter()
        await produce(
            env.cfg.kafka,
            topic,
            [(f"{tag}-{i}".encode(), event(etype, f"{tag}-{i}", i)) for i in range(n)],
        )
        done = 0
        deadline = time.monotonic() + 900
        while done < n and time.monotonic() < deadline:
            await asyncio.sleep(0.25)
            done = await env.pool.fetchval(
                "SELECT count(*) FROM activity_runs WHERE activity_id = $1::uuid"
                " AND status = 'succeeded'",
                aid,
            )
        seconds = time.perf_counter() - t0
        if done < n:
            raise TimeoutError(f"only {done}/{n} runs finished")
    finally:
        await stop(procs, kill_after=None)
    return {
        "routers": routers,
        "workers": workers,
        "runs": n,
        "seconds": round(seconds, 2),
        "runs_per_second": round(n / seconds, 1),
    }


async def run(n: int | None = None) -> dict[str, object]:
    n = n or int(os.environ.get("BENCH_SCALE_EVENTS", "600"))
    env = await make_env(NAME)
    try:
        single = await layout(env, 1, 1, n)
        scaled = await layout(env, 3, 2, n)
    finally:
        await drop_env(env)
    ratio = float(scaled["runs_per_second"]) / float(single["runs_per_second"])  # type: ignore[arg-type]
    figures = {
        "single": single,
        "scaled": scaled,
        "speedup": round(ratio, 2),
        "cores": os.cpu_count(),
    }
    write_result(NAME, figures)
    print(f"1 router + 1 worker : {single['runs_per_second']} runs/s ({n} runs)")
    print(f"3 routers + 2 workers: {scaled['runs_per_second']} runs/s ({n} runs)")
    print(
        f"scale: speed-up {ratio:.2f}x on {os.cpu_count()} cores (3 routers + 2 workers vs 1 + 1)"
    )
    return figures


if __name__ == "__main__":
    parse_args(
        __doc__,
        {"BENCH_SCALE_EVENTS": "events per layout (default 600)"},
    )
    asyncio.run(run())
