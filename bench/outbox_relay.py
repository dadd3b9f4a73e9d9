"""outbox_relay: emits/s through the outbox and the relay ÷ the old direct publish, one run.

Both paths do what an ``emit`` task's step does after its handler, for the same
``BENCH_OUTBOX_EMITS`` tasks already claimed and running, ``BENCH_OUTBOX_CONCURRENCY``
at a time (a worker runs that many local activities at once):

* direct (the old handler): ``send_and_wait`` on the idempotent producer, then mark
  the task succeeded (``store.advance_task``): at least once;
* outbox: ``store.finish_with_outbox`` (the success and the outbox row in one
  transaction), published by an ``ingest relay`` running in-process: exactly once.

Each rate is end to end, from the first emit to the last record seen by a
``read_committed`` consumer of the topic (started before, so its start-up is not
counted). The figure is outbox ÷ direct; the cost of exactly once is 1 minus it.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Awaitable, Callable

from bench.cli import parse_args
from bench.common import Env, drop_env, make_env, started_producer, wait_until, write_result
from pipeline import kafka
from pipeline.clients import ensure_topics
from pipeline.runtime import Shutdown
from relay.service import Relay
from relay.settings import RelaySettings
from schemas.status import TaskStatus
from schemas.workflow_io import TaskSpec
from workers import store

NAME = "outbox_relay"


def _message(task_id: str, topic: str) -> store.OutboxMessage:
    return store.OutboxMessage(
        task_id, topic, task_id.encode(), (("task_id", task_id.encode()),), b'{"bench": true}'
    )


async def _claimed(env: Env, n: int) -> list[str]:
    run_id = str(uuid.uuid4())
    ids = [f"task-{run_id}:emit:{i}" for i in range(n)]
    for i, tid in enumerate(ids):
        await store.claim_task(env.pool, tid, run_id, TaskSpec("emit", i, {}), running=True)
    return ids


async def _seen_all(env: Env, topic: str, n: int, ready: asyncio.Event) -> float:
    """When a read_committed consumer has seen ``n`` records of ``topic``."""
    consumer = kafka.consumer(
        env.cfg.kafka, topic, group_id=f"bench-{uuid.uuid4().hex[:8]}", auto_offset_reset="latest"
    )
    await consumer.start()
    try:
        while not consumer.assignment():
            await consumer.getmany(timeout_ms=100)
        for tp in consumer.assignment():
            await consumer.position(tp)  # resolve "latest" before anything is sent
        ready.set()
        seen = 0
        while seen < n:
            seen += sum(len(m) for m in (await consumer.getmany(timeout_ms=500)).values())
        return time.perf_counter()
    finally:
        await consumer.stop()


async def _timed(
    env: Env, topic: str, ids: list[str], one: Callable[[str], Awaitable[object]], conc: int
) -> dict[str, float]:
    ready = asyncio.Event()
    seen = asyncio.create_task(_seen_all(env, topic, len(ids), ready))
    await ready.wait()
    gate = asyncio.Semaphore(conc)

    async def guarded(tid: str) -> None:
        async with gate:
            await one(tid)

    t0 = time.perf_counter()
    await asyncio.gather(*(guarded(t) for t in ids))
    written = time.perf_counter() - t0
    end = await asyncio.wait_for(seen, 600) - t0
    return {
        "emits": len(ids),
        "steps_seconds": round(written, 3),
        "visible_seconds": round(end, 3),
        "per_second": round(len(ids) / end, 1),
    }


async def run(n: int | None = None, conc: int | None = None) -> dict[str, object]:
    n = n or int(os.environ.get("BENCH_OUTBOX_EMITS", "5000"))
    conc = conc or int(os.environ.get("BENCH_OUTBOX_CONCURRENCY", "32"))
    env = await make_env(NAME)
    direct_topic, outbox_topic = f"bench-direct-{env.tag}", f"bench-outbox-{env.tag}"
    await ensure_topics(env.cfg.kafka, [direct_topic, outbox_topic], 3)
    try:
        direct_ids, outbox_ids = await _claimed(env, n), await _claimed(env, n)
        async with started_producer(env.cfg.kafka) as producer:

            async def direct(tid: str) -> None:
                m = _message(tid, direct_topic)
                await producer.send_and_wait(m.topic, m.body, key=m.key, headers=list(m.headers))
                await store.advance_task(env.pool, tid, TaskStatus.SUCCEEDED)

            d = await _timed(env, direct_topic, direct_ids, direct, conc)
        shutdown = Shutdown()
        instance = f"bench-{env.tag}"
        relay = Relay(
            env.cfg,
            RelaySettings(
                instance=instance, progress_topic=f"progress-{instance}", poll_interval_ms=20
            ),
            shutdown,
        )
        relay_task = asyncio.create_task(relay.run())
        try:
            await wait_until(lambda: relay.leading, 60, "the relay to own the outbox")
            o = await _timed(
                env,
                outbox_topic,
                outbox_ids,
                lambda tid: store.finish_with_outbox(env.pool, tid, _message(tid, outbox_topic)),
                conc,
            )
        finally:
            shutdown.trigger()
            await relay_task
    finally:
        await drop_env(env)
    ratio = o["per_second"] / d["per_second"]
    figures = {"direct": d, "outbox": o, "concurrency": conc, "ratio": round(ratio, 2)}
    write_result(NAME, figures)
    print(f"direct publish: {d['per_second']} emits/s ({d})")
    print(f"outbox + relay: {o['per_second']} emits/s ({o})")
    print(f"{NAME}: {ratio:.3g} (outbox ÷ direct, report)")
    return figures


if __name__ == "__main__":
    parse_args(
        __doc__,
        {
            "BENCH_OUTBOX_EMITS": "emits per path (default 5000)",
            "BENCH_OUTBOX_CONCURRENCY": "emits in flight at once (default 32)",
        },
    )
    asyncio.run(run())
