"""memory: RSS growth of a router process across a replay of N already-routed events.

The replay runs in a child process (``python -m bench.memory child``) so its RSS is the
router's alone: baseline after imports and connections, then the peak sampled every
100 ms during the replay. BENCH_MEMORY_EVENTS (default 100,000) goes up to 1,000,000.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench.cli import parse_args
from bench.common import drop_env, make_env, verdict, write_result
from bench.replay_duplicates import prepare_routed

NAME = "memory"
TARGET_MB = 50.0
ROOT = Path(__file__).resolve().parent.parent


async def child() -> None:
    import gc

    import psutil

    from pipeline import db, settings
    from pipeline.clients import temporal_client
    from replay.topic import Replayer, ReplayRange
    from router.settings import RouterSettings

    cfg = settings.load_settings(process__metrics_port=0)
    pool = await db.create_pool(cfg.database.url.get_secret_value(), 1, 10)
    client = await temporal_client(cfg.temporal)
    proc = psutil.Process()
    gc.collect()
    base = proc.memory_info().rss
    peak = [base]

    async def sample() -> None:
        while True:
            peak[0] = max(peak[0], proc.memory_info().rss)
            await asyncio.sleep(0.1)

    sampler = asyncio.create_task(sample())
    report = await Replayer(cfg, RouterSettings(), client=client, pool=pool).run(
        ReplayRange(topic=cfg.kafka.events_topic, from_offset=0)
    )
    sampler.cancel()
    gc.collect()
    end = proc.memory_info().rss
    await pool.close()
    print(
        json.dumps(
            {
                "rss_base_mb": round(base / 2**20, 1),
                "rss_peak_mb": round(peak[0] / 2**20, 1),
                "rss_end_mb": round(end / 2**20, 1),
                "read": report.stats.read,
                "ledger_duplicates": report.stats.ledger_duplicates,
                "seconds": round(report.elapsed_seconds, 2),
            }
        )
    )


async def run(n: int | None = None) -> dict[str, object]:
    n = n or int(os.environ.get("BENCH_MEMORY_EVENTS", "100000"))
    env = await make_env(NAME)
    try:
        t0 = time.perf_counter()
        await prepare_routed(env, n)
        prep = time.perf_counter() - t0
        k = env.cfg.kafka
        envvars = {
            **os.environ,
            "KAFKA_BOOTSTRAP_SERVERS": k.bootstrap_servers,
            "KAFKA_EVENTS_TOPIC": k.events_topic,
            "KAFKA_DLQ_TOPIC": k.dlq_topic,
            "TEMPORAL_ADDRESS": env.cfg.temporal.address,
            "TEMPORAL_NAMESPACE": env.cfg.temporal.namespace,
            "TEMPORAL_TASK_QUEUE": env.cfg.temporal.task_queue,
            "DATABASE_URL": env.cfg.database.url.get_secret_value(),
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.memory", "child",
            cwd=ROOT, env=envvars, stdout=subprocess.PIPE,
        )  # fmt: skip
        out, _ = await proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"memory child failed with {proc.returncode}")
        res = json.loads(out.decode().strip().splitlines()[-1])
    finally:
        await drop_env(env)
    growth = res["rss_peak_mb"] - res["rss_base_mb"]
    figures = {"events": n, "prepare_seconds": round(prep, 1), **res}
    figures |= {"rss_growth_mb": round(growth, 1), "target_mb": TARGET_MB}
    write_result(NAME, figures)
    print(
        f"replay of {res['read']:,} events in {res['seconds']}s: RSS {res['rss_base_mb']} MB -> "
        f"peak {res['rss_peak_mb']} MB (end {res['rss_end_mb']} MB)"
    )
    print(verdict(f"{NAME} growth", growth, TARGET_MB, at_most=True, unit=" MB"))
    return figures


if __name__ == "__main__":
    args = parse_args(
        __doc__,
        {"BENCH_MEMORY_EVENTS": "already-routed events replayed (default 100000)"},
        flags=lambda p: p.add_argument(
            "role", nargs="?", choices=["child"], help="internal: the replaying child process"
        ),
    )
    if args.role == "child":
        asyncio.run(child())
    else:
        asyncio.run(run())
