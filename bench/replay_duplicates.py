"""replay_duplicates: events/s of a replay where every event was already routed ÷ Temporal's
raw duplicate-rejection rate (the best a ledger-less replay could do).

The "already routed" state is written with :meth:`router.ledger.Ledger.record`, the very
write the router makes before committing (routing 20,000 events for real first would take
minutes and measure fresh starts, which router_fresh already does). The replay rate is
end to end: from ``Replayer.run()`` to its report, start-up included.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid

from bench import baselines
from bench.cli import parse_args
from bench.common import (
    Env,
    drop_env,
    event,
    make_env,
    produce,
    seed_activity,
    verdict,
    write_result,
)
from replay.topic import Replayer, ReplayRange
from router.ledger import Ledger, LedgerEntry
from router.settings import RouterSettings
from schemas import ids

NAME = "replay_duplicates"
TARGET = 10.0


async def prepare_routed(env: Env, n: int) -> None:
    """``n`` events on the events topic, every one already in the ledger."""
    aid = await seed_activity(env.pool, "bench.dup")
    tag = uuid.uuid4().hex[:8]
    eids = [f"{tag}-{i}" for i in range(n)]
    await produce(
        env.cfg.kafka,
        env.cfg.kafka.events_topic,
        [(e.encode(), event("bench.dup", e, i)) for i, e in enumerate(eids)],
    )
    ledger = Ledger(env.pool)
    for i in range(0, n, 10_000):
        await ledger.record(
            [
                LedgerEntry(ids.event_workflow_id(aid, e), aid, e, source_topic="bench")
                for e in eids[i : i + 10_000]
            ]
        )


async def replay(env: Env) -> dict[str, object]:
    series: list[tuple[float, int]] = []
    t0 = time.perf_counter()
    last = [0.0]

    def progress(done: int, total: int) -> None:
        now = time.perf_counter() - t0
        if now - last[0] >= 0.1 or done == total:
            series.append((round(now, 3), done))
            last[0] = now

    report = await Replayer(
        env.cfg, RouterSettings(), client=env.client, pool=env.pool, progress=progress
    ).run(ReplayRange(topic=env.cfg.kafka.events_topic, from_offset=0))
    s = report.stats
    assert s.started == 0 and s.ledger_duplicates == s.read, s.as_dict()
    return {
        "events": s.read,
        "seconds": round(report.elapsed_seconds, 3),
        "per_second": round(s.read / report.elapsed_seconds, 1),
        "stats": s.as_dict(),
        "series": series,
    }


async def run(n: int | None = None) -> dict[str, object]:
    n = n or int(os.environ.get("BENCH_REPLAY_EVENTS", "20000"))
    env = await make_env(NAME)
    try:
        raw = await baselines.duplicate_ceiling(
            env.client, env.cfg.temporal.task_queue, int(os.environ.get("BENCH_RAW_DUPS", "1000"))
        )
        await prepare_routed(env, n)
        rep = await replay(env)
    finally:
        await drop_env(env)
    ratio = float(rep["per_second"]) / float(raw["ceiling"])  # type: ignore[arg-type]
    figures = {"raw_duplicate": raw, "replay": rep, "ratio": round(ratio, 2), "target": TARGET}
    write_result(NAME, figures)
    print(f"raw duplicate rejections per concurrency: {raw['per_concurrency']} (/s)")
    print(f"replay of {rep['events']} already-routed events: {rep['per_second']}/s")
    print(verdict(NAME, ratio, TARGET))
    return figures


if __name__ == "__main__":
    parse_args(
        __doc__,
        {
            "BENCH_REPLAY_EVENTS": "already-routed events replayed (default 20000)",
            "BENCH_RAW_DUPS": "duplicate starts for the raw rejection rate (default 1000)",
        },
    )
    asyncio.run(run())
