"""One worker change against the SDK's default, in one process: phase (b) of bench.e2e.

``python -m bench.e2e.runner_ab`` runs ``RunActivityWorkflow`` directly (as phase (b)
does: closed loop, ``BENCH_E2E_IN_FLIGHT`` in flight, ``BENCH_E2E_TASKS`` noop tasks,
default 1) in rounds of ``BENCH_E2E_RUNS`` (default 256), alternating A, the worker
as shipped, and B, the worker with one part the SDK's own (``BENCH_AB_AXIS``):

* ``runner`` (default): the sandbox runner. A: ``INGEST_SANDBOX_DIRECT_CONTEXTS=true``
  (serialization contexts read from the workflow instance); B: the SDK's runner.
* ``converter``: the data converter. A: ``schemas.converter`` (dataclass hints
  resolved once per class, dataclasses encoded without ``asdict``), the one every
  client of the project and ``bench.common.make_env`` use; B: the SDK's default
  converter. Same payload bytes.

Rounds go in the order ABBAABBA, so a drift in the machine's speed weighs on both
alike. Each round starts its own worker. Prints, per round and as means, runs/s and
CPU ms per run of this process (the worker) and of the Temporal server, then the
figure it targets: worker CPU per run, A / B (below 1 = the change saves). A
diagnostic, not part of ``make bench``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import statistics
import time
from typing import Any

from temporalio.client import Client
from temporalio.converter import DataConverter

from app.parts import worker_parts
from bench.cli import parse_args
from bench.common import drop_env, make_env, seed_activity, start_worker, steady_rate, write_result
from bench.e2e.probe import CpuMeter, find_pids
from bench.e2e.run import E2E_ENV, direct_runs
from workers.settings import WorkerSettings

NAME = "runner_ab"
ORDER = "ABBAABBA"
AXES = {"runner": ("direct contexts", "SDK runner"), "converter": ("cached", "SDK converter")}


async def _round(
    env: Any, aid: str, meter: CpuMeter, axis: str, a: bool, n: int
) -> dict[str, float]:
    direct = a or axis != "runner"
    if axis == "converter" and not a:
        ours = env.client.data_converter  # the SDK's converter, with our codec if one is on
        sdk_conv = dataclasses.replace(
            DataConverter.default,
            payload_codec=ours.payload_codec,
            failure_converter_class=ours.failure_converter_class,
        )
        sdk = Client(**{**env.client.config(), "data_converter": sdk_conv})
        env = dataclasses.replace(env, client=sdk)
    worker, shutdown = start_worker(
        env, worker_parts(), WorkerSettings(sandbox_direct_contexts=direct)
    )
    try:
        await direct_runs(env, aid, 4)  # warm-up: imports, caches, pollers
        meter.start()
        _, finishes, _ = await direct_runs(env, aid, n)
        cpu = meter.stop()
    finally:
        shutdown.trigger()
        await worker
    return {
        "runs_per_second": round(steady_rate(finishes), 2),
        "worker_cpu_ms_per_run": round(cpu["bench process"] * 1000 / n, 1),
        "temporal_cpu_ms_per_run": round(cpu["temporal"] * 1000 / n, 1),
    }


async def run() -> dict[str, Any]:
    n = int(os.environ.get("BENCH_E2E_RUNS", "256"))
    tasks = int(os.environ.get("BENCH_E2E_TASKS", "1"))
    axis = os.environ.get("BENCH_AB_AXIS", "runner")
    if axis not in AXES:
        raise SystemExit(f"BENCH_AB_AXIS={axis!r}: use one of {', '.join(AXES)}")
    env = await make_env(NAME)
    rounds: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
    try:
        aid = await seed_activity(env.pool, "bench.runner_ab", [{"type": "noop", "count": tasks}])
        meter = CpuMeter(find_pids(int(env.cfg.temporal.address.rpartition(":")[2])))
        for kind in ORDER:
            row = await _round(env, aid, meter, axis, kind == "A", n)
            rounds[kind].append(row)
            print(f"{time.strftime('%H:%M:%S')} {kind} {row}", flush=True)
    finally:
        await drop_env(env)

    def mean(rs: list[dict[str, float]], field: str) -> float:
        return round(statistics.mean(r[field] for r in rs), 2)

    means = {k: {f: mean(rs, f) for f in rs[0]} for k, rs in rounds.items()}
    ratio = means["A"]["worker_cpu_ms_per_run"] / means["B"]["worker_cpu_ms_per_run"]
    rate = means["A"]["runs_per_second"] / means["B"]["runs_per_second"]
    figures = {
        "axis": axis, "tasks": tasks, "runs_per_round": n, "order": ORDER, "rounds": rounds,
        "means": means,
        "worker_cpu_a_over_b": round(ratio, 3), "rate_a_over_b": round(rate, 3),
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }  # fmt: skip
    write_result(NAME if axis == "runner" else f"{NAME}_{axis}", figures)
    a_label, b_label = AXES[axis]
    for k, label in (("A", a_label), ("B", b_label)):
        print(f"{k} ({label}): {means[k]}")
    print(
        f"worker CPU per run, {a_label} / {b_label}: {ratio:.3f}; "
        f"runs/s {a_label} / {b_label}: {rate:.3f}"
    )
    return figures


if __name__ == "__main__":
    parse_args(
        __doc__,
        {
            "BENCH_E2E_RUNS": E2E_ENV["BENCH_E2E_RUNS"],
            "BENCH_E2E_TASKS": E2E_ENV["BENCH_E2E_TASKS"],
            "BENCH_E2E_IN_FLIGHT": E2E_ENV["BENCH_E2E_IN_FLIGHT"],
            "BENCH_AB_AXIS": "runner (the sandbox runner) or converter (the data converter)",
        },
    )
    asyncio.run(run())
