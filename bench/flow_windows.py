"""Debounce windows under a hot key: where one window workflow stops keeping up with its
signals, and what the router's per-key collection buys, in one run on the running stack.

* signals: one ``FlowWindowWorkflow`` holding one long debounce window is signalled
  directly (no router) at each rate of ``BENCH_FLOW_RATES`` per second for
  ``BENCH_FLOW_SECONDS`` each, the way an uncollected router would for a key with
  that event rate. Per rate: the rate achieved, the signal acknowledgement latency
  (p50/p99), the signals refused as "workflow is busy" (retried), history events per
  signal, how long the workflow took after the last signal to have processed them all
  (backlog), and after how many minutes at that rate Temporal would suggest a
  continue-as-new (4,096 events: the server default).
* collected: ``BENCH_FLOW_EVENTS`` events for one key, arriving at ``BENCH_FLOW_HOT_RATE``
  per second, through the router's own ``router.flow.windows.Windows.add``: events/s,
  signals sent, events per signal. Collection caps a key at 1 / ``SIGNAL_INTERVAL``
  signals per second (5/s) whatever its event rate.

The last line is the ratio of the backlog seconds at the highest rate to those at the
lowest (report): above 1, the workflow fell behind its signals.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import uuid
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from bench.cli import parse_args
from bench.common import Env, drop_env, make_env, start_worker, write_result
from definitions import store
from router.catalog import ActivityCatalog
from router.flow import metrics as flow_metrics
from router.flow.windows import SIGNAL_INTERVAL, Windows
from schemas.definitions import ActivityDef
from schemas.flow.io import FlowWindowInput, FlowWindowSignal, WindowNote
from schemas.ids import window_workflow_id
from schemas.workflow_io import RunActivityInput
from workers.flow.part import flow_part
from workers.flow.window import FlowWindowWorkflow
from workers.parts import core_part

SUGGEST_CAN_EVENTS = 4096  # the server's limit.historyCount.suggestContinueAsNew default


async def _activity(env: Env) -> str:
    aid = uuid.uuid4()
    await store.upsert(
        env.pool,
        [
            ActivityDef.model_validate(
                {
                    "id": aid,
                    "name": f"bench {aid}",
                    "trigger": {"type": "event", "event_type": "bench.flow"},
                    "tasks": [{"type": "noop"}],
                    "flow": {"debounce": {"period": "1h", "key": "data.k"}},
                }
            )
        ],
    )
    return str(aid)


async def _signal_rate(env: Env, aid: str, rate: float, seconds: float) -> dict[str, Any]:
    key = f"rate-{rate:g}-{uuid.uuid4().hex[:6]}"
    note = WindowNote(1, "debounce", 1, period=3600.0)
    wid = window_workflow_id(aid, key)
    lat: list[float] = []
    busy = 0
    first_run: list[str | None] = []

    async def one() -> None:
        nonlocal busy
        t = time.perf_counter()
        while True:
            try:
                started = await env.client.start_workflow(
                    FlowWindowWorkflow.run,
                    FlowWindowInput(aid, key),
                    id=wid,
                    task_queue=env.cfg.temporal.task_queue,
                    start_signal="windows",
                    start_signal_args=[FlowWindowSignal([note])],
                )
                first_run.append(started.result_run_id)
                break
            except RPCError as exc:  # "Workflow is busy": retried, as the router does
                if exc.status != RPCStatusCode.RESOURCE_EXHAUSTED:
                    raise
                busy += 1
                await asyncio.sleep(0.1)
        lat.append(time.perf_counter() - t)

    n = int(rate * seconds)
    t0 = time.perf_counter()
    sends = []
    for i in range(n):
        delay = t0 + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        sends.append(asyncio.create_task(one()))
    await asyncio.gather(*sends)
    sent_s = time.perf_counter() - t0
    handle: WorkflowHandle[Any, Any] = env.client.get_workflow_handle(wid)
    # Processed once the history stops growing (each signal's workflow task completed).
    last, since, run_id = -1, time.perf_counter(), None
    while time.perf_counter() - since < 1.0:
        desc = await handle.describe()
        length = desc.raw_description.workflow_execution_info.history_length
        if length != last:
            last, since, run_id = length, time.perf_counter(), desc.run_id
        await asyncio.sleep(0.1)
    backlog = max(0.0, since - t0 - sent_s)
    await handle.terminate("bench done")
    # Only while the first run holds every signal: after a continue-as-new the current
    # run's history holds part of them (reported as None, with the run count).
    continued = run_id != first_run[0]
    per_signal = None if continued else last / n
    return {
        "rate_asked": rate,
        "rate_achieved": round(n / sent_s, 1),
        "ack_p50_ms": round(statistics.median(lat) * 1000, 1),
        "ack_p99_ms": round(sorted(lat)[int(0.99 * (n - 1))] * 1000, 1),
        "busy_rejections": busy,
        "continued_as_new": continued,
        "history_events_per_signal": round(per_signal, 2) if per_signal else None,
        "backlog_seconds": round(backlog, 2),
        "minutes_to_continue_as_new": (
            round(SUGGEST_CAN_EVENTS / (per_signal * rate) / 60, 1) if per_signal else None
        ),
    }


async def _collected(env: Env, aid: str, events: int, rate: float) -> dict[str, Any]:
    catalog = ActivityCatalog(env.pool, 3600)
    await catalog.refresh()
    windows = Windows(
        pool=env.pool,
        client=env.client,
        task_queue=env.cfg.temporal.task_queue,
        catalog=catalog,
        stopping=lambda: False,
    )
    key = f"hot-{uuid.uuid4().hex[:6]}"
    signals = flow_metrics.FLOW_WINDOW_SIGNALS.labels(activity=aid)
    before = signals._value.get()  # type: ignore[attr-defined]

    class Msg:
        topic, partition = "bench", 0

        def __init__(self, offset: int) -> None:
            self.offset = offset

    runs = []
    for i in range(events):
        eid = f"ev-{key}-{i}"
        event = {"type": "bench.flow", "event_id": eid, "data": {"k": key}}
        runs.append((Msg(i), RunActivityInput.for_event(aid, eid, event)))
    t0 = time.perf_counter()
    adds = []
    for i, (m, r) in enumerate(runs):
        delay = t0 + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        adds.append(asyncio.create_task(windows.add(m, r)))  # type: ignore[arg-type]
    await asyncio.gather(*adds)
    took = time.perf_counter() - t0
    sent = signals._value.get() - before  # type: ignore[attr-defined]
    await env.client.get_workflow_handle(window_workflow_id(aid, key)).terminate("bench done")
    return {
        "events": events,
        "seconds": round(took, 2),
        "events_per_s_asked": rate,
        "events_per_s": round(events / took, 1),
        "signals": int(sent),
        "events_per_signal": round(events / max(sent, 1), 1),
        "signals_per_s": round(sent / took, 1),
        "signal_interval_s": SIGNAL_INTERVAL,
    }


async def run() -> dict[str, Any]:
    rates = [float(r) for r in os.environ.get("BENCH_FLOW_RATES", "2,5,10,25,50").split(",")]
    seconds = float(os.environ.get("BENCH_FLOW_SECONDS", "10"))
    events = int(os.environ.get("BENCH_FLOW_EVENTS", "2000"))
    hot_rate = float(os.environ.get("BENCH_FLOW_HOT_RATE", "500"))
    env = await make_env("flow-windows")
    worker, shutdown = start_worker(env, (core_part, flow_part))
    try:
        aid = await _activity(env)
        per_rate = [await _signal_rate(env, aid, r, seconds) for r in rates]
        collected = await _collected(env, aid, events, hot_rate)
    finally:
        shutdown.trigger()
        await worker
        await drop_env(env)
    for row in per_rate:
        print(
            f"{row['rate_asked']:>5g} signals/s asked, {row['rate_achieved']:>5g} sent: ack p50 "
            f"{row['ack_p50_ms']} ms p99 {row['ack_p99_ms']} ms, "
            f"{row['busy_rejections']} 'workflow is busy' refusals, "
            f"{row['history_events_per_signal']} history events/signal, backlog "
            f"{row['backlog_seconds']} s, continue-as-new every "
            f"{row['minutes_to_continue_as_new']} min"
        )
    print(
        f"collected: {events} events for one key in {collected['seconds']} s "
        f"({collected['events_per_s']} events/s) with {collected['signals']} signals "
        f"({collected['events_per_signal']} events per signal, {collected['signals_per_s']}/s)"
    )
    low, high = per_rate[0]["backlog_seconds"], per_rate[-1]["backlog_seconds"]
    ratio = round((high + 0.1) / (low + 0.1), 2)
    figures = {"rates": per_rate, "collected": collected, "backlog_ratio": ratio}
    write_result("flow_windows", figures)
    print(f"flow_windows: backlog ratio {ratio} ({rates[-1]:g}/s against {rates[0]:g}/s, report)")
    return figures


if __name__ == "__main__":
    parse_args(
        __doc__,
        {
            "BENCH_FLOW_RATES": "signals/s to one window workflow, comma-separated (2,5,10,25,50)",
            "BENCH_FLOW_SECONDS": "seconds of signalling per rate (default 10)",
            "BENCH_FLOW_EVENTS": "events for one hot key through the router's collection (2000)",
            "BENCH_FLOW_HOT_RATE": "their arrival rate, events/s (default 500)",
        },
    )
    asyncio.run(run())
