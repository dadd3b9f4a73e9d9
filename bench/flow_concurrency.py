"""Flow concurrency: the overhead of ``flow.concurrency`` whose limit is never reached,
against the same activity without a flow block, in one run against the same servers.

``BENCH_FLOW_RUNS`` runs of one ``noop`` task are started at once, per shape, in
rounds that alternate the shapes (so drift hits all alike):

* ``plain``: no flow block;
* ``limit``: ``concurrency: {limit: 1000}`` (one resource for the activity);
* ``keyed``: ``concurrency: {limit: 1000, key: data.k}`` with a new key per run (the
  worst case: every run creates its resource and cleans it up).

runs/s = runs / (first start to last result). The last line is the ratio
limit / plain (target >= 0.9: issue 23), with keyed / plain beside it. The worker runs
in-process with the production parts (runs + permits).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from typing import Any

from bench.cli import parse_args
from bench.common import Env, drop_env, make_env, start_worker, write_result
from definitions import store as activity_store
from schemas.definitions import ActivityDef, EventTrigger, TaskDef
from schemas.flow.spec import FlowDef
from schemas.workflow_io import RunActivityInput
from workers.flow.part import flow_part
from workers.parts import core_part
from workers.run_workflow import RunActivityWorkflow

SHAPES: dict[str, dict[str, Any] | None] = {
    "plain": None,
    "limit": {"concurrency": {"limit": 1000}},
    "keyed": {"concurrency": {"limit": 1000, "key": "data.k"}},
}


async def _activity(env: Env, flow: dict[str, Any] | None) -> str:
    aid = uuid.uuid4()
    act = ActivityDef(
        id=aid,
        name=f"bench {aid}",
        trigger=EventTrigger(type="event", event_type="bench.flow"),
        tasks=[TaskDef(type="noop")],
        flow=FlowDef.model_validate(flow) if flow else None,
    )
    await activity_store.upsert(env.pool, [act])
    return str(aid)


async def _batch(env: Env, activity_id: str, n: int) -> float:
    """Seconds from the first start to the last result of ``n`` runs started at once."""
    runs = [
        RunActivityInput.for_event(
            activity_id, eid, {"event_id": eid, "type": "bench.flow", "data": {"k": eid}}
        )
        for eid in (uuid.uuid4().hex for _ in range(n))
    ]
    t0 = time.perf_counter()
    handles = await asyncio.gather(
        *(
            env.client.start_workflow(
                RunActivityWorkflow.run, r, id=r.workflow_id, task_queue=env.cfg.temporal.task_queue
            )
            for r in runs
        )
    )
    results = await asyncio.gather(*(h.result() for h in handles))
    assert {r.status for r in results} == {"succeeded"}, results
    return time.perf_counter() - t0


async def run(runs: int | None = None, rounds: int | None = None) -> dict[str, Any]:
    runs = runs or int(os.environ.get("BENCH_FLOW_RUNS", "50"))
    rounds = rounds or int(os.environ.get("BENCH_FLOW_ROUNDS", "2"))
    env = await make_env("flow_concurrency")
    worker, shutdown = start_worker(env, (core_part, flow_part))
    seconds = dict.fromkeys(SHAPES, 0.0)
    try:
        ids = {shape: await _activity(env, flow) for shape, flow in SHAPES.items()}
        for shape in SHAPES:  # warm up every path
            await _batch(env, ids[shape], 2)
        for _ in range(rounds):
            for shape in SHAPES:
                seconds[shape] += await _batch(env, ids[shape], runs)
        left = await env.pool.fetchval("SELECT count(*) FROM flow_slot_keys")
    finally:
        shutdown.trigger()
        await worker
        await drop_env(env)
    rate = {s: runs * rounds / seconds[s] for s in SHAPES}
    figures = {
        "runs_per_shape": runs * rounds,
        **{f"runs_per_s_{s}": round(r, 2) for s, r in rate.items()},
        "keyed_ratio": round(rate["keyed"] / rate["plain"], 2),
        "resources_left": int(left),
        "ratio": round(rate["limit"] / rate["plain"], 2),
    }
    write_result("flow_concurrency", figures)
    print(
        f"{runs * rounds} runs per shape: {figures['runs_per_s_plain']} runs/s plain, "
        f"{figures['runs_per_s_limit']} with concurrency (limit not reached), "
        f"{figures['runs_per_s_keyed']} keyed (a resource per run); "
        f"{figures['resources_left']} resources left"
    )
    print(
        f"flow_concurrency: ratio {figures['ratio']} (limit / plain, target >= 0.9); "
        f"keyed {figures['keyed_ratio']}"
    )
    return figures


if __name__ == "__main__":
    parse_args(
        __doc__,
        {
            "BENCH_FLOW_RUNS": "runs started at once per shape and round (default 50)",
            "BENCH_FLOW_ROUNDS": "rounds alternating the shapes (default 2)",
        },
    )
    asyncio.run(run())
