"""cProfile of the worker during phase (b) of bench.e2e: where its CPU goes, per run.

``python -m bench.e2e.profile`` runs ``BENCH_E2E_RUNS`` (default 60) runs of
``BENCH_E2E_TASKS`` (default 1) noop tasks on the production worker, as phase (b)
does (closed loop, ``BENCH_E2E_IN_FLIGHT`` in flight), or with
``BENCH_E2E_PROFILE_PHASE=a`` the bare shape of phase (a) on the same worker
settings, so the two profiles can be compared; with two profilers: one on
the event-loop thread (polling, instance creation, payload conversion, local
activities and handlers) and one per workflow-activation thread (the SDK runs
activations in a thread pool). Prints the top functions of each by cumulative
time in ms per run, and the buckets the closing notes quote. A diagnostic, not
part of ``make bench``; profiling slows everything down, so read shares, not rates.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import cProfile
import io
import os
import pstats
import time
from typing import Any

from app.parts import worker_parts
from bench.cli import parse_args
from bench.common import drop_env, make_env, seed_activity, start_worker
from bench.e2e.run import E2E_ENV, _bare_worker, bare_runs, direct_runs

# (label, substring of pstats' "file:line(function)" key) whose cumulative time is reported
BUCKETS = (
    ("instance creation (sandbox load + defn)", "_create_workflow_instance"),
    ("activations (in the workflow threads)", "(activate)"),
    ("decode activation (payloads in)", "(decode_activation)"),
    ("encode completion (payloads out)", "(encode_completion)"),
    ("activity tasks (local + handler)", "(_execute_activity)"),
)


def _ms_per_run(stats: pstats.Stats, n: int, top: int) -> tuple[str, dict[str, float]]:
    buckets: dict[str, float] = {}
    for (file, line, fn), (_cc, _nc, _tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        key = f"{file}:{line}({fn})"
        for label, part in BUCKETS:
            if part in key and "/temporalio/" in file:
                buckets[label] = max(buckets.get(label, 0.0), ct * 1000 / n)
    out = io.StringIO()
    stats.stream = out  # type: ignore[attr-defined]
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue(), {k: round(v, 1) for k, v in buckets.items()}


def _context_lookups(stats: pstats.Stats, n: int) -> float:
    """Serialization-context look-ups per run (``workers.sandbox.DirectContexts``)."""
    calls = sum(
        nc
        for (file, _line, fn), (_cc, nc, _tt, _ct, _callers) in stats.stats.items()  # type: ignore[attr-defined]
        if file.endswith("workers/sandbox.py") and fn.startswith("get_") and fn.endswith("_context")
    )
    return round(calls / n, 1)


async def run() -> dict[str, Any]:
    n = int(os.environ.get("BENCH_E2E_RUNS", "60"))
    tasks = int(os.environ.get("BENCH_E2E_TASKS", "1"))
    phase = os.environ.get("BENCH_E2E_PROFILE_PHASE", "b")
    if phase not in ("a", "b"):
        raise SystemExit(f"BENCH_E2E_PROFILE_PHASE={phase!r}: use a or b")
    threads: list[cProfile.Profile] = []

    def profile_thread() -> None:
        prof = cProfile.Profile()
        threads.append(prof)
        prof.enable()

    plain = concurrent.futures.ThreadPoolExecutor

    class Profiled(plain):  # type: ignore[valid-type,misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, initializer=profile_thread, **kwargs)

    concurrent.futures.ThreadPoolExecutor = Profiled  # type: ignore[misc]
    env = await make_env("e2e-profile")
    try:
        if phase == "a":
            queue, bare = _bare_worker(env)
            running = asyncio.create_task(bare.run())

            def go(k: int) -> Any:
                return bare_runs(env.client, queue, tasks, k)
        else:
            worker, shutdown = start_worker(env, worker_parts())
            aid = await seed_activity(
                env.pool, "bench.e2e.profile", [{"type": "noop", "count": tasks}]
            )

            def go(k: int) -> Any:
                return direct_runs(env, aid, k)

        await go(4)  # warm-up
        main = cProfile.Profile()
        t0 = time.process_time()
        main.enable()
        await go(n)
        main.disable()
        cpu = time.process_time() - t0
        if phase == "a":
            await bare.shutdown()
            await running
        else:
            shutdown.trigger()
            await worker
    finally:
        concurrent.futures.ThreadPoolExecutor = plain  # type: ignore[misc]
        await drop_env(env)
    lookups = _context_lookups(pstats.Stats(main), n)
    loop_text, loop_buckets = _ms_per_run(pstats.Stats(main), n, 30)
    wf = pstats.Stats(threads[0]) if threads else None
    for prof in threads[1:]:
        assert wf is not None
        wf.add(prof)
    wf_text, wf_buckets = _ms_per_run(wf, n, 20) if wf is not None else ("", {})
    print(f"== phase ({phase}): event-loop thread, ms per run ({n} runs x {tasks} task(s))")
    print(loop_text)
    print(f"== workflow-activation threads, ms per run\n{wf_text}")
    print(f"process CPU (all threads, profiled): {cpu * 1000 / n:.1f} ms/run")
    for label, ms in {**loop_buckets, **wf_buckets}.items():
        print(f"  {label:<42} {ms:>7} ms/run")
    print(f"  serialization-context look-ups per run: {lookups}")
    return {"cpu_ms_per_run": cpu * 1000 / n, "context_lookups_per_run": lookups,
            **loop_buckets, **wf_buckets}  # fmt: skip


if __name__ == "__main__":
    parse_args(
        __doc__,
        {
            "BENCH_E2E_RUNS": "runs profiled (default 60)",
            "BENCH_E2E_TASKS": E2E_ENV["BENCH_E2E_TASKS"],
            "BENCH_E2E_IN_FLIGHT": E2E_ENV["BENCH_E2E_IN_FLIGHT"],
            "BENCH_E2E_PROFILE_PHASE": "b (RunActivityWorkflow, default) or a (the bare shape)",
        },
    )
    asyncio.run(run())
