"""``make bench``: every benchmark against the running local stack, then a summary table.

The raw start ceiling measured by router_fresh is handed to latency, so "half the
ceiling" refers to this run's servers.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench import ingress, latency, memory, permits, plot, replay_duplicates, router_fresh, scale
from bench.cli import parse_args
from bench.common import write_result
from bench.e2e import run as e2e


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
    print("\n== latency")
    lat: dict[str, Any] = await latency.run(ceiling=float(rf["raw_start"]["ceiling"]))
    rows.append(("latency p99", f"{lat['p99_ms']} ms (p50 {lat['p50_ms']} ms)", "<= 250 ms"))
    print("\n== memory")
    mem: dict[str, Any] = await memory.run()
    rows.append(("memory", f"{mem['rss_growth_mb']} MB over {mem['events']:,} events", "<= 50 MB"))
    print("\n== scale")
    sc: dict[str, Any] = await scale.run()
    rows.append(("scale (3 routers+2 workers vs 1+1)", f"{sc['speedup']}x", "report"))
    print("\n== e2e")
    ee: dict[str, Any] = await e2e.run()
    for shape in ee["shapes"]:
        t = shape["tasks"]
        rows.append((f"e2e b/a ({t} task)", f"{shape['b_a']}", ">= 0.85"))
        rows.append((f"e2e c/b ({t} task)", f"{shape['c_b']}", ">= 0.9"))
        rows.append((f"e2e b/a_local ({t} task)", f"{shape['b_a_local']}", "report"))
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
    print()
    plot.plot()
    write_result("summary", {"rows": rows, "seconds": round(time.perf_counter() - t0, 1)})
    print(f"\n{'benchmark':<20} {'measured':<40} target")
    for name, value, target in rows:
        print(f"{name:<20} {value:<40} {target}")


if __name__ == "__main__":
    parse_args(__doc__ + "\nEach benchmark's own variables: python -m bench.<name> --help.")
    asyncio.run(main())
