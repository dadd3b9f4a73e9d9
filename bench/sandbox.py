"""What the workflow sandbox costs per workflow instance, before any activation.

For each workflow class, ``BENCH_SANDBOX_INSTANCES`` (default 200) sandboxed
instances are created the way the worker creates one per workflow run. Printed in
ms per instance, twice: with the workflow's module reloaded per instance (the
sandbox's default: it loads the module afresh and applies ``workflow.defn``
again) and with the module passed through (``WorkerPart.passthrough``, what the
worker does now). ``bench.e2e.bare``'s classes for comparison. Then the cost
of one serialization-context look-up (the SDK asks for one per payload sequence,
several times per payload), through the sandbox (the SDK's runner) and directly
(``workers.sandbox.DirectContexts``, what the worker does now), in µs per call
and as a ratio. CPU only, no
server; ``BENCH_SANDBOX_PROFILE=1`` adds a cProfile of the reloading runner (top
25 by cumulative time).

``python -m bench.sandbox`` (not part of ``make bench``: a diagnostic).
"""

from __future__ import annotations

import asyncio
import cProfile
import io
import os
import pstats
import time
from typing import Any

from bench.cli import parse_args
from bench.common import write_result
from bench.e2e.bare import BareChild, BareParent
from tests.support.sandbox import instance_details, reloaded_modules
from workers.run_workflow import RunActivityWorkflow
from workers.sandbox import DirectContexts, workflow_runner
from workers.task_workflow import TaskInstanceWorkflow

NAME = "sandbox"
CLASSES = (RunActivityWorkflow, TaskInstanceWorkflow, BareParent, BareChild)


def per_instance_ms(cls: type, runner: Any, k: int) -> float:
    det = instance_details(cls)
    runner.create_instance(det)  # warm: host-side imports, caches
    t0 = time.perf_counter()
    for _ in range(k):
        runner.create_instance(det)
    return round((time.perf_counter() - t0) * 1000 / k, 3)


def context_us_per_call(cls: type, k: int) -> tuple[float, float]:
    """µs per ``get_serialization_context`` call: (sandboxed, direct), on one instance."""
    instance = workflow_runner(cls.__module__).create_instance(instance_details(cls))
    assert isinstance(instance, DirectContexts) and instance.direct
    out = []
    for target in (instance.sandboxed, instance):
        target.get_serialization_context(None)
        t0 = time.perf_counter()
        for _ in range(k):
            target.get_serialization_context(None)
        out.append(round((time.perf_counter() - t0) * 1e6 / k, 2))
    return out[0], out[1]


def _profile(k: int) -> str:
    runner = workflow_runner()
    prof = cProfile.Profile()
    prof.enable()
    for cls in CLASSES[:2]:
        det = instance_details(cls)
        for _ in range(k):
            runner.create_instance(det)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(25)
    return out.getvalue()


async def run(k: int | None = None) -> dict[str, Any]:
    k = k or int(os.environ.get("BENCH_SANDBOX_INSTANCES", "200"))
    rows: dict[str, dict[str, Any]] = {}
    for cls in CLASSES:
        module_passed = workflow_runner(cls.__module__)
        sandboxed_us, direct_us = context_us_per_call(cls, 20 * k)
        rows[cls.__name__] = {
            "context_us_per_call_sandboxed": sandboxed_us,
            "context_us_per_call_direct": direct_us,
            "module": cls.__module__,
            "reloaded": await reloaded_modules(cls, workflow_runner()),
            "ms_per_instance": per_instance_ms(cls, workflow_runner(), k),
            "ms_per_instance_module_passed_through": per_instance_ms(cls, module_passed, k),
        }
    figures = {"instances": k, "classes": rows, "date": time.strftime("%Y-%m-%d")}
    write_result(NAME, figures)
    for name, r in rows.items():
        print(
            f"{name:<22} {r['ms_per_instance']:>7} ms/instance "
            f"({r['ms_per_instance_module_passed_through']} ms with its module passed through); "
            f"reloads {', '.join(r['reloaded'])}; context look-up "
            f"{r['context_us_per_call_sandboxed']} µs sandboxed, "
            f"{r['context_us_per_call_direct']} µs direct (direct/sandboxed "
            f"{r['context_us_per_call_direct'] / r['context_us_per_call_sandboxed']:.3f})"
        )
    if os.environ.get("BENCH_SANDBOX_PROFILE") == "1":
        print(_profile(k))
    return figures


if __name__ == "__main__":
    parse_args(
        __doc__,
        {
            "BENCH_SANDBOX_INSTANCES": "sandboxed instances per workflow class (default 200)",
            "BENCH_SANDBOX_PROFILE": "1: add a cProfile of the reloading runner",
        },
        stack=False,
    )
    asyncio.run(run())
