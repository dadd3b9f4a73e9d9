"""Permits: acquire-to-release latency and acquisitions/s for one resource, against
the same tasks without a permit, in the same run against the same servers.

* latency: ``BENCH_PERMITS_SEQUENTIAL`` runs of one ``noop`` task, one after the
  other, with and without a permit (median end-to-end run time), plus the
  permit's own span (``permit_slots.acquired_at`` -> ``ended_at``, a noop handler);
* throughput: one run of ``BENCH_PERMITS_TASKS`` noop tasks at once, with a
  permit each (capacity = the task count, so what is measured is the permit
  machinery, with only the random slot collisions of concurrent acquirers) and
  without; acquisitions/s = tasks / run time.

The last line is the throughput ratio (permit / plain). The worker runs
in-process with the production parts (runs + permits).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import uuid
from typing import Any

from bench.cli import parse_args
from bench.common import Env, drop_env, make_env, start_worker, write_result
from definitions import store as activity_store
from schemas.definitions import ActivityDef, EventTrigger, ResourceDef, TaskDef
from schemas.ids import event_workflow_id, run_id_for
from schemas.workflow_io import RunActivityInput
from workers.parts import core_part
from workers.permits import store
from workers.permits.part import permit_part
from workers.run_workflow import RunActivityWorkflow


async def _activity(env: Env, task: dict[str, Any]) -> str:
    aid = uuid.uuid4()
    act = ActivityDef(
        id=aid,
        name=f"bench {aid}",
        trigger=EventTrigger(type="event", event_type="bench.permits"),
        tasks=[TaskDef.model_validate(task)],
    )
    await activity_store.upsert(env.pool, [act])
    return str(aid)


async def _run(env: Env, activity_id: str) -> float:
    """Seconds from start to result of one RunActivityWorkflow."""
    event_id = uuid.uuid4().hex
    wf_id = event_workflow_id(activity_id, event_id)
    t0 = time.perf_counter()
    result = await env.client.execute_workflow(
        RunActivityWorkflow.run,
        RunActivityInput(
            activity_id,
            wf_id,
            str(run_id_for(wf_id)),
            "event",
            event_id,
            {"event_id": event_id, "type": "bench.permits", "data": {}},
        ),
        id=wf_id,
        task_queue=env.cfg.temporal.task_queue,
    )
    assert result.status == "succeeded", result
    return time.perf_counter() - t0


async def run(sequential: int | None = None, tasks: int | None = None) -> dict[str, Any]:
    sequential = sequential or int(os.environ.get("BENCH_PERMITS_SEQUENTIAL", "20"))
    tasks = tasks or int(os.environ.get("BENCH_PERMITS_TASKS", "100"))
    env = await make_env("permits")
    worker, shutdown = start_worker(env, (core_part, permit_part))
    try:
        one, many = "bench-one", "bench-many"
        await store.upsert_resources(
            env.pool,
            [
                ResourceDef(name=one, capacity=1, lease_seconds=60),
                ResourceDef(name=many, capacity=tasks, lease_seconds=300),
            ],
        )
        plain_1 = await _activity(env, {"type": "noop"})
        permit_1 = await _activity(env, {"type": "noop", "permit": {"resource": one}})
        plain_n = await _activity(env, {"type": "noop", "count": tasks})
        permit_n = await _activity(
            env, {"type": "noop", "count": tasks, "permit": {"resource": many}}
        )
        await _run(env, plain_1)  # warm up both paths
        await _run(env, permit_1)
        lat_plain, lat_permit = [], []
        for _ in range(sequential):  # interleaved, so drift hits both alike
            lat_plain.append(await _run(env, plain_1))
            lat_permit.append(await _run(env, permit_1))
        span = await env.pool.fetchval(
            "SELECT extract(epoch FROM ended_at - acquired_at) FROM permit_slots"
            " WHERE resource = $1",
            one,
        )
        plain_s = await _run(env, plain_n)
        permit_s = await _run(env, permit_n)
        acquired = await env.pool.fetchval(
            "SELECT sum(token) FROM permit_slots WHERE resource = $1", many
        )
    finally:
        shutdown.trigger()
        await worker
        await drop_env(env)
    p50_plain, p50_permit = statistics.median(lat_plain), statistics.median(lat_permit)
    figures = {
        "sequential_runs": sequential,
        "p50_run_ms_plain": round(p50_plain * 1000, 1),
        "p50_run_ms_permit": round(p50_permit * 1000, 1),
        "latency_ratio": round(p50_permit / p50_plain, 2),
        "permit_span_ms_last": round(float(span) * 1000, 1) if span is not None else None,
        "tasks": tasks,
        "tasks_per_s_plain": round(tasks / plain_s, 1),
        "acquisitions_per_s": round(tasks / permit_s, 1),
        "acquisitions": int(acquired or 0),
        "ratio": round(plain_s / permit_s, 2),
    }
    write_result("permits", figures)
    print(
        f"latency p50 (one task per run): {figures['p50_run_ms_permit']} ms with a permit vs "
        f"{figures['p50_run_ms_plain']} ms without ({figures['latency_ratio']}x); "
        f"permit held {figures['permit_span_ms_last']} ms around a noop handler"
    )
    print(
        f"{tasks} concurrent tasks: {figures['acquisitions_per_s']} acquisitions/s vs "
        f"{figures['tasks_per_s_plain']} tasks/s without a permit"
    )
    print(f"permits: throughput ratio {figures['ratio']} (permit / plain, report)")
    return figures


if __name__ == "__main__":
    parse_args(
        __doc__,
        {
            "BENCH_PERMITS_SEQUENTIAL": "one-task runs for the latency figure (default 20)",
            "BENCH_PERMITS_TASKS": "tasks of the one throughput run (default 100)",
        },
    )
    asyncio.run(run())
