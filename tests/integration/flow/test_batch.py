"""Batch on real Kafka, Temporal and PostgreSQL: 25 events, max_size 10, give batches of
10, 10 and 5 (the last at its timeout); each run's id comes from its members and the run
sees all of them; a replay of the topic and a redelivery of its events make no new batch."""

from __future__ import annotations

import uuid

import orjson

from replay.topic import Replayer, ReplayRange
from router.settings import RouterSettings
from schemas import ids
from tests.integration.flow.support import (
    runs,
    seed_flow_activity,
    started,
    window_workflow_closed,
    windows,
)
from tests.support import db, kafka
from tests.support.routing import route_until_committed
from tests.support.runs import worker_factory
from tests.support.wait import eventually, quiet
from workers.flow.part import flow_part
from workers.parts import core_part

BATCH = {"batch": {"max_size": 10, "timeout": "2s"}}
TASK = {"type": "noop"}


async def _produce(cfg, event_type: str, event_ids: list[str]) -> None:
    await kafka.produce(
        cfg.kafka.bootstrap_servers,
        cfg.kafka.events_topic,
        [(e.encode(), db.event(event_type, e, n=i), []) for i, e in enumerate(event_ids)],
    )


async def test_25_events_make_batches_of_10_10_and_5_and_a_replay_makes_none(
    cfg, temporal, db_pool
):
    etype = f"t.batch.{uuid.uuid4().hex[:6]}"
    aid = await seed_flow_activity(db_pool, etype, BATCH, [TASK])
    evs = [f"b-{uuid.uuid4().hex[:8]}-{i}" for i in range(25)]
    await _produce(cfg, etype, evs)
    tag = uuid.uuid4().hex[:8]
    worker = worker_factory(cfg, temporal, db_pool)
    async with worker(parts=(core_part, flow_part)):
        live = await route_until_committed(
            cfg, RouterSettings(group=f"live-{tag}", commit_interval_ms=100), temporal, db_pool
        )
        assert live.routing.stats.windowed == 25 and live.routing.stats.started == 0

        async def done() -> bool:
            rows = await runs(db_pool, aid)
            return len(rows) == 3 and all(r["status"] == "succeeded" for r in rows)

        await eventually(done, 60, "three batch runs to succeed")
        got = await windows(db_pool, aid)
        assert sorted(w["size"] for w in got) == [5, 10, 10]
        assert sorted(w["closed_by"] for w in got) == ["full", "full", "timeout"]
        assert next(w["size"] for w in got if w["closed_by"] == "timeout") == 5
        assert sorted(e for w in got for e in w["members"]) == sorted(evs)  # each event once
        # the run's id is derived from its members, and the run saw all of them
        by_id = {w["run_workflow_id"]: w for w in got}
        for w in got:
            assert w["run_workflow_id"] == ids.batch_workflow_id(aid, w["members"])
        assert {r["workflow_id"] for r in await runs(db_pool, aid)} == set(by_id)
        tasks = await db_pool.fetch("SELECT payload FROM task_instances")
        seen = {}
        for t in tasks:
            payload = orjson.loads(t["payload"])
            seen[payload["trigger"]["workflow_id"]] = [e["event_id"] for e in payload["events"]]
            assert payload["event"] is None and payload["trigger"]["window"]["kind"] == "batch"
        assert seen == {wid: w["members"] for wid, w in by_id.items()}

        # A replay of the events topic: every event is found in its batch already.
        rng = ReplayRange(topic=cfg.kafka.events_topic, from_offset=0)
        report = await Replayer(cfg, RouterSettings(), client=temporal, pool=db_pool).run(rng)
        assert report.complete and report.stats.read == 25
        assert report.stats.windowed == 0 and report.stats.ledger_duplicates == 25
        # A redelivery: the same events again on the topic, routed by the live group.
        await _produce(cfg, etype, evs[:7] + evs[-3:])
        again = await route_until_committed(
            cfg, RouterSettings(group=f"live-{tag}", commit_interval_ms=100), temporal, db_pool
        )
        assert again.routing.stats.windowed == 0 and again.routing.stats.ledger_duplicates == 10

        async def sample() -> tuple[int, int, int]:
            n_windows = await db_pool.fetchval("SELECT count(*) FROM flow_windows")
            return n_windows, await started(db_pool, aid), len(await runs(db_pool, aid))

        assert await quiet(sample, "windows, started windows and runs", period=3.0) == (3, 3, 3)
        await window_workflow_closed(temporal, aid, ids.NO_KEY)
