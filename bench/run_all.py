"""``make bench``: every benchmark against the running local stack, then a summary table.

The raw start ceiling measured by router_fresh is handed to latency, so "half the
ceiling" refers to this run's servers. bench.e2e runs twice: on the stack's dev
server, then on a private real Temporal server (``BENCH_E2E_SHARDS`` shards, default
4) that it starts and discards; the table names the server of each e2e row.
bench.tracing runs the pipeline with tracing off and on against the stack's Jaeger,
which it starts unless it answers (``ingest stack up --tracing`` starts it too).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any, cast

from bench import (
    flow,
    flow_concurrency,
    flow_controls,
    ingress,
    latency,
    memory,
    outbox_relay,
    permits,
    plot,
    replay_duplicates,
    router_fresh,
    scale,
    tracing,
)
from bench.cli import parse_args
from bench.common import write_result
from bench.e2e import run as e2e


def e2e_rows(ee: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The summary rows of one bench.e2e run, named for its server."""
    on = "dev" if ee["temporal"] == "dev" else f"server, {ee['shards']} shards"
    rows = []
    for shape in ee["shapes"]:
        t = f"{shape['tasks']} task, {on}"
        a, b, c = (shape[k] for k in "abc")
        rates = f"{a['runs_per_second']} / {b['runs_per_second']} / {c['runs_per_second']}"
        rows.append((f"e2e a/b/c runs/s ({t})", rates, "report"))
        rows.append((f"e2e b/a ({t})", f"{shape['b_a']}", ">= 0.85"))
        rows.append((f"e2e c/b ({t})", f"{shape['c_b']}", ">= 0.9"))
        rows.append((f"e2e c/a ({t})", f"{shape['c_a']}", ">= 0.9"))
        for key, what, goal in (("transitions_b_a", "state transitions", "<= 1.2"),
                                ("worker_cpu_b_a", "worker CPU", "<= 1.25")):  # fmt: skip
            value = shape[key]
            rows.append((f"e2e {what} b/a ({t})", "missing" if value is None else f"{value}", goal))
        rows.append((f"e2e b/a_local ({t})", f"{shape['b_a_local']}", "report"))
        for phase in "abc":
            s = shape[phase]["server_per_run"]
            figures = ", ".join(f"{k} {v}" for k, v in s.items() if v is not None)
            rows.append((f"e2e ({phase}) server/run ({t})", figures or "no metrics", "report"))
    return rows


async def main() -> None:
    rows: list[tuple[str, str, str]] = []
    t0 = time.perf_counter()
    print("== router_fresh")
    rf: dict[str, Any] = await router_fresh.run()
    rows.append(("router_fresh", f"{rf['ratio']}", ">= 0.9"))
    print("\n== replay_duplicates")
    rd: dict[str, Any] = await replay_duplicates.run()
    rows.append(("replay_duplicates", f"{rd['ratio']}", ">= 10"))
    print("\n== ingress")
    ig = await ingress.run()
    rows.append(("ingress", f"{ig['ratio']}" if ig else "skipped", ">= 0.8"))
    txns = cast(dict[str, dict[str, Any]], ig.get("transactions", {})) if ig else {}
    for key, f in txns.items():
        if key != "plain":  # transactional ingress ÷ plain, same run (issue 24)
            rows.append((f"ingress transactional {key} ÷ plain", f"{f['rate_ratio']}x", "report"))
    print("\n== latency")
    lat: dict[str, Any] = await latency.run(ceiling=float(rf["raw_start"]["ceiling"]))
    rows.append(("latency p99", f"{lat['p99_ms']} ms (p50 {lat['p50_ms']} ms)", "<= 250 ms"))
    print("\n== memory")
    mem: dict[str, Any] = await memory.run()
    rows.append(("memory", f"{mem['rss_growth_mb']} MB over {mem['events']:,} events", "<= 50 MB"))
    print("\n== scale")
    sc: dict[str, Any] = await scale.run()
    rows.append(("scale (3 routers+2 workers vs 1+1)", f"{sc['speedup']}x", "report"))
    for kind in e2e.KINDS:
        print(f"\n== e2e ({kind})")
        rows += e2e_rows(await e2e.run(temporal=kind))
    print("\n== tracing")
    tr: dict[str, Any] = await tracing.run()
    rows.append(("tracing on ÷ off, runs/s (100 % sampled)", f"{tr['ratio']}", ">= 0.9"))
    spans = tr["on"].get("spans", {}).get("per_run_mean")
    rows.append(
        (
            "tracing on ÷ off, CPU/run ingress+router+worker",
            f"{tr['pipeline_cpu_on_off']}x ({spans} spans/run)",
            "report",
        )
    )
    off = tr["off_path"]["fraction_of_router_cpu"]
    rows.append(("tracing off: router's off path ÷ its CPU/event", f"{off}", "report"))
    print("\n== permits")
    pm: dict[str, Any] = await permits.run()
    rows.append(
        (
            "permits",
            f"{pm['ratio']}x tasks/s ({pm['acquisitions_per_s']}/s), "
            f"latency {pm['latency_ratio']}x",
            "report",
        ),
    )
    print("\n== flow")
    fl: dict[str, Any] = await flow.run()
    acc = fl["accuracy"]
    rows.append(("flow: throttle (limit not reached) ÷ none", f"{fl['ratio']}x", ">= 0.9"))
    rows.append(("flow: throttle accuracy, achieved ÷ limit", f"{acc['rate_ratio']}x", "report"))
    print("\n== flow_concurrency")
    fc: dict[str, Any] = await flow_concurrency.run()
    rows.append(("flow: concurrency (limit not reached) ÷ none", f"{fc['ratio']}x", ">= 0.9"))
    print("\n== flow_controls")
    fo: dict[str, Any] = await flow_controls.run()
    for shape in ("ordered", "timeouts", "fairness"):
        rows.append((f"flow: {shape} (not holding) ÷ none", f"{fo[f'ratio_{shape}']}x", ">= 0.95"))
    print("\n== outbox_relay")
    ob: dict[str, Any] = await outbox_relay.run()
    rows.append(
        (
            "outbox_relay (outbox+relay ÷ direct publish)",
            f"{ob['ratio']}x ({ob['outbox']['per_second']} vs {ob['direct']['per_second']}/s)",
            "report",
        )
    )
    print()
    plot.plot()
    write_result("summary", {"rows": rows, "seconds": round(time.perf_counter() - t0, 1)})
    print(f"\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores")
    print(f"{'benchmark':<48} {'measured':<40} target")
    for name, value, target in rows:
        print(f"{name:<48} {value:<40} {target}")


if __name__ == "__main__":
    parse_args(__doc__ + "\nEach benchmark's own variables: python -m bench.<name> --help.")
    asyncio.run(main())
