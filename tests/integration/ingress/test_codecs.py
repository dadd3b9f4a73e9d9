"""Compressed record batches from producers nobody here wrote, end to end.

librdkafka (confluent-kafka) and Kafka's own Java producer each publish a few events to
the raw topic once per codec Kafka has (none, gzip, snappy, lz4, zstd). Ingress, router
and worker then make exactly one run per event: every codec is read, nothing is lost,
nothing runs twice.
"""

from __future__ import annotations

import asyncio
import uuid

from schemas import ids
from tests.support import db, inprocess, kafka, wait

PER_CODEC = 3
PRODUCERS = {"librdkafka": kafka.produce_librdkafka, "java": kafka.produce_java}


async def test_every_codec_from_librdkafka_and_java_is_one_run_per_event(
    cfg, topics, temporal, db_pool
):
    tag = uuid.uuid4().hex[:8]
    etype = f"codec.{tag}"
    activity = await db.seed_activity(db_pool, etype)
    event_ids: list[str] = []
    for codec in kafka.CODECS:
        for name, produce in PRODUCERS.items():
            batch = [f"{name}-{codec}-{tag}-{i}" for i in range(PER_CODEC)]
            values = [db.event(etype, e, codec=codec, producer=name) for e in batch]
            await asyncio.to_thread(produce, cfg.kafka.bootstrap_servers, topics.raw, values, codec)
            event_ids += batch
    assert await kafka.count(cfg.kafka.bootstrap_servers, topics.raw) == len(event_ids)
    expected = {ids.event_workflow_id(activity, e) for e in event_ids}

    async def runs() -> int:
        return int(await db_pool.fetchval("SELECT count(*) FROM activity_runs"))

    async with inprocess.pipeline(cfg, temporal, db_pool, tag) as running:

        async def all_succeeded() -> bool:
            running.assert_running()
            n = await db_pool.fetchval(
                "SELECT count(*) FROM activity_runs WHERE status = 'succeeded'"
            )
            return int(n) >= len(expected)

        await wait.eventually(all_succeeded, 120, "a finished run for every event")
        settled = await wait.quiet(runs, "the number of runs")

    assert settled == len(expected)
    rows = await db_pool.fetch("SELECT workflow_id, status FROM activity_runs")
    assert {r["workflow_id"] for r in rows} == expected
    assert {r["status"] for r in rows} == {"succeeded"}
