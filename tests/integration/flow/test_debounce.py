"""Debounce on real Kafka, Temporal and PostgreSQL: a burst of 10 events for one key gives
one run, with the last event; keys debounce apart; with max_wait a steady stream, which
alone would push the run back forever, still runs every max_wait."""

from __future__ import annotations

import asyncio
import time
import uuid

from aiokafka import AIOKafkaProducer

from router.flow import metrics as m
from router.settings import RouterSettings
from schemas import ids
from tests.integration.flow.support import (
    runs,
    seed_flow_activity,
    window_workflow_closed,
    windows,
)
from tests.support import db, kafka
from tests.support.runs import worker_factory
from tests.support.wait import eventually, quiet
from workers.flow.part import flow_part
from workers.parts import core_part


def _msgs(etype: str, customer: str, event_ids: list[str]) -> list[tuple[bytes, bytes, list]]:
    # Keyed by the customer: one partition, so the topic keeps the order they were sent in.
    return [(customer.encode(), db.event(etype, e, customer=customer), []) for e in event_ids]


async def _router(cfg, temporal, db_pool, group: str):  # type: ignore[no-untyped-def]
    from pipeline.runtime import Shutdown
    from router.service import Router

    shutdown = Shutdown()
    router = Router(
        cfg,
        RouterSettings(group=group, commit_interval_ms=100),
        client=temporal,
        pool=db_pool,
        shutdown=shutdown,
    )
    return router, shutdown, asyncio.create_task(router.run())


def _signals(aid: str) -> float:
    return m.FLOW_WINDOW_SIGNALS.labels(activity=aid)._value.get()  # type: ignore[attr-defined]


async def test_a_burst_gives_one_run_with_the_last_event_per_key(cfg, temporal, db_pool):
    etype = f"t.deb.{uuid.uuid4().hex[:6]}"
    flow = {"debounce": {"period": "2s", "key": "data.customer", "max_wait": "30s"}}
    aid = await seed_flow_activity(db_pool, etype, flow)
    tag = uuid.uuid4().hex[:8]
    c1 = [f"d1-{tag}-{i}" for i in range(10)]
    c2 = [f"d2-{tag}-{i}" for i in range(4)]
    signals = _signals(aid)
    debounced = m.FLOW_DEBOUNCED.labels(activity=aid)._value.get()  # type: ignore[attr-defined]
    worker = worker_factory(cfg, temporal, db_pool)
    async with worker(parts=(core_part, flow_part)):
        router, shutdown, task = await _router(cfg, temporal, db_pool, f"g-{tag}")
        try:
            # no customer: an error on the event, never a silent null key
            await kafka.produce(
                cfg.kafka.bootstrap_servers,
                cfg.kafka.events_topic,
                [(b"x", db.event(etype, f"nokey-{tag}", other="x"), [])],
            )
            # ten events for c1 and four for c2 at once, well within the period
            burst = []
            for i in range(10):
                burst += _msgs(etype, "c1", c1[i : i + 1]) + _msgs(etype, "c2", c2[i : i + 1])
            await kafka.produce(cfg.kafka.bootstrap_servers, cfg.kafka.events_topic, burst)

            async def done() -> bool:
                rows = await runs(db_pool, aid)
                return len(rows) == 2 and all(r["status"] == "succeeded" for r in rows)

            await eventually(done, 60, "one run per customer")
            for key in ("c1", "c2"):
                await window_workflow_closed(temporal, aid, key)
        finally:
            shutdown.trigger()
            await asyncio.wait_for(task, 30)
        got = {w["key"]: w for w in await windows(db_pool, aid)}
        assert set(got) == {"c1", "c2"}
        assert got["c1"]["members"] == c1 and got["c2"]["members"] == c2
        assert {w["closed_by"] for w in got.values()} == {"quiet"}
        rows = {r["workflow_id"]: r for r in await runs(db_pool, aid)}
        for members in (c1, c2):  # one run each, with the last event, id from first and last
            wid = ids.debounce_workflow_id(aid, members[0], members[-1])
            assert rows[wid]["event_id"] == members[-1]
        assert router.routing.stats.windowed == 14
        dlq = await kafka.read_all(cfg.kafka.bootstrap_servers, cfg.kafka.dlq_topic)
        assert [dict(d.headers)["dlq_reason"] for d in dlq] == [b"flow_key_missing"]
        assert router.routing.stats.dlq == 1
        # Collected per key (at most a signal per 0.2 s per key): fewer signals than events.
        assert 0 < _signals(aid) - signals < 14
        assert m.FLOW_DEBOUNCED.labels(activity=aid)._value.get() - debounced == 14  # type: ignore[attr-defined]


async def test_max_wait_runs_a_steady_stream_every_max_wait(cfg, temporal, db_pool):
    etype = f"t.deb.{uuid.uuid4().hex[:6]}"
    # An event every 0.25 s never leaves the 1 s period quiet: only max_wait ends a window.
    flow = {"debounce": {"period": "1s", "max_wait": "2.5s"}}
    aid = await seed_flow_activity(db_pool, etype, flow)
    tag = uuid.uuid4().hex[:8]
    evs = [f"s-{tag}-{i}" for i in range(32)]
    worker = worker_factory(cfg, temporal, db_pool)
    async with worker(parts=(core_part, flow_part)):
        _, shutdown, task = await _router(cfg, temporal, db_pool, f"g-{tag}")
        try:
            t0 = time.monotonic()
            producer = AIOKafkaProducer(bootstrap_servers=cfg.kafka.bootstrap_servers, acks="all")
            await producer.start()  # one producer: each send is a few ms, the pace is ours
            try:
                for e in evs:  # ~8 s of stream
                    key, value, _ = _msgs(etype, "k", [e])[0]
                    await producer.send_and_wait(cfg.kafka.events_topic, value, key=key)
                    await asyncio.sleep(0.25)
            finally:
                await producer.stop()
            streamed = time.monotonic() - t0

            async def placed() -> int:
                return int(await db_pool.fetchval(
                    "SELECT count(*) FROM flow_members WHERE activity_id = $1::uuid", aid
                ))  # fmt: skip

            await eventually(lambda: _all(placed, len(evs)), 30, "every event in a window")

            async def all_started() -> bool:
                return not await db_pool.fetchval(
                    "SELECT count(*) FROM flow_windows WHERE activity_id = $1::uuid"
                    " AND state <> 'started'",
                    aid,
                )

            await eventually(all_started, 30, "every window's run to start")
            await window_workflow_closed(temporal, aid, ids.NO_KEY)

            async def finished() -> bool:
                rows = await runs(db_pool, aid)
                return all(r["status"] == "succeeded" for r in rows)

            await eventually(finished, 30, "every run to finish")
        finally:
            shutdown.trigger()
            await asyncio.wait_for(task, 30)
        got = await windows(db_pool, aid)
        # Every event in exactly one window, in stream order; one run per window.
        assert [e for w in got for e in w["members"]] == evs
        by_max_wait = [w for w in got if w["closed_by"] == "max_wait"]
        # ~8 s of stream with max_wait 2.5 s: at least two windows cut by max_wait (three
        # on a quiet machine), where a debounce without max_wait would make one run.
        assert len(by_max_wait) >= 2, (streamed, [(w["size"], w["closed_by"]) for w in got])
        assert {w["run_workflow_id"] for w in got} == {
            r["workflow_id"] for r in await runs(db_pool, aid)
        }
        assert await quiet(lambda: _count_runs(db_pool, aid), "runs", period=2.0) == len(got)


async def _all(sample, n: int) -> bool:  # type: ignore[no-untyped-def]
    return await sample() == n


async def _count_runs(db_pool, aid: str) -> int:  # type: ignore[no-untyped-def]
    return len(await runs(db_pool, aid))
