"""Issue 39's controls: what a run of an activity that declares one pays when the control
does not hold it back, against the same activity without a flow block, in one run.

``BENCH_FLOW_RUNS`` runs of one ``noop`` task are started at once, per shape, in rounds
that alternate the shapes (drift hits all alike), on the worker's production parts:

* ``plain``: no flow block;
* ``ordered``: ``ordered: {key: data.k}`` with a new key per run, so every run is at its
  turn: the router's place is given first (``router.flow.order``, as ``Routing.submit``
  does), and the run's ``start_run`` reads it (one statement) and its finish step closes
  it (the step a plain run skips when its last task marked it succeeded);
* ``timeouts``: ``timeouts: {start: 1h, finish: 2h}``, never reached: the run's body runs
  under one durable timer;
* ``fairness``: ``fairness: {key: data.k, weight: 2}``: a start option only (on the dev
  server the fairness key is carried and ignored), so the ratio shows its cost is nil.

``cancel_on`` is a gate control: its cost is the router's one ``flow_decide`` call per run
(the throttle's), measured by ``bench.flow`` for the gate; the worker does nothing for it.

runs/s = runs / (first start to last result). Each line prints ``shape / plain`` (target
>= 0.95: issue 39, "a control adds no step to a run that does not use it"); the last line
is the lowest of them.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from typing import Any

from bench.cli import parse_args
from bench.common import Env, drop_env, make_env, start_worker, write_result
from bench.flow_concurrency import _activity
from pipeline.starter import start_priority
from router.flow.keys import read_keys
from router.flow.order import OrderLines, PlaceRequest
from schemas.flow.spec import FlowDef
from schemas.workflow_io import RunActivityInput
from workers.flow.part import flow_part
from workers.parts import core_part
from workers.run_workflow import RunActivityWorkflow

SHAPES: dict[str, dict[str, Any] | None] = {
    "plain": None,
    "ordered": {"ordered": {"key": "data.k"}},
    "timeouts": {"timeouts": {"start": "1h", "finish": "2h"}},
    "fairness": {"fairness": {"key": "data.k", "weight": 2}},
}


async def _batch(env: Env, activity_id: str, flow: dict[str, Any] | None, n: int) -> float:
    """Seconds from the first start to the last result of ``n`` runs started at once
    (the ordered shape's places given first, in one call, as the router gives them)."""
    runs = [
        RunActivityInput.for_event(
            activity_id, eid, {"event_id": eid, "type": "bench.flow", "data": {"k": eid}}
        )
        for eid in (uuid.uuid4().hex for _ in range(n))
    ]
    fairness = None
    t0 = time.perf_counter()
    if flow is not None and "ordered" in flow:
        spec = FlowDef.model_validate(flow)
        await OrderLines(env.pool).assign(
            [PlaceRequest(r, read_keys(spec, r.event or {}).key("ordered")) for r in runs]
        )
    if flow is not None and "fairness" in flow:
        spec = FlowDef.model_validate(flow)
        fairness = [read_keys(spec, r.event or {}).fairness for r in runs]
    handles = await asyncio.gather(
        *(
            env.client.start_workflow(
                RunActivityWorkflow.run,
                r,
                id=r.workflow_id,
                task_queue=env.cfg.temporal.task_queue,
                **_fairness(fairness[i] if fairness else None),
            )
            for i, r in enumerate(runs)
        )
    )
    results = await asyncio.gather(*(h.result() for h in handles))
    assert {r.status for r in results} == {"succeeded"}, results
    return time.perf_counter() - t0


def _fairness(fair: Any) -> dict[str, Any]:
    """The start's priority as ``pipeline.starter`` builds it for a fairness key."""
    if fair is None:
        return {}
    return {"priority": start_priority(None, fair)}


async def run(runs: int | None = None, rounds: int | None = None) -> dict[str, Any]:
    runs = runs or int(os.environ.get("BENCH_FLOW_RUNS", "50"))
    rounds = rounds or int(os.environ.get("BENCH_FLOW_ROUNDS", "2"))
    env = await make_env("flow_controls")
    worker, shutdown = start_worker(env, (core_part, flow_part))
    seconds = dict.fromkeys(SHAPES, 0.0)
    try:
        ids = {shape: await _activity(env, flow) for shape, flow in SHAPES.items()}
        for shape, flow in SHAPES.items():  # warm up every path
            await _batch(env, ids[shape], flow, 2)
        for _ in range(rounds):
            for shape, flow in SHAPES.items():
                seconds[shape] += await _batch(env, ids[shape], flow, runs)
        open_places = await env.pool.fetchval(
            "SELECT count(*) FROM flow_order_places WHERE done_at IS NULL"
        )
    finally:
        shutdown.trigger()
        await worker
        await drop_env(env)
    rate = {s: runs * rounds / seconds[s] for s in SHAPES}
    ratios = {s: round(rate[s] / rate["plain"], 2) for s in SHAPES if s != "plain"}
    figures = {
        "runs_per_shape": runs * rounds,
        **{f"runs_per_s_{s}": round(r, 2) for s, r in rate.items()},
        **{f"ratio_{s}": r for s, r in ratios.items()},
        "open_places_left": int(open_places),
        "ratio": min(ratios.values()),
    }
    write_result("flow_controls", figures)
    print(f"{runs * rounds} runs per shape: {figures['runs_per_s_plain']} runs/s plain")
    for s, r in ratios.items():
        print(f"  {s:9s} {figures[f'runs_per_s_{s}']:8.2f} runs/s  ratio {r} (target >= 0.95)")
    print(f"  {figures['open_places_left']} ordered places left open (0: every line moved on)")
    print(f"flow_controls: ratio {figures['ratio']} (the lowest shape / plain, target >= 0.95)")
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
