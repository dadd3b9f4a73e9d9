"""flow.ordered end to end on real Kafka, Temporal and PostgreSQL: the live router gives
each run its place (router/flow/order.py), the worker runs each line one at a time in
its events' order (workers/flow/order.py).

Events are produced keyed by their entity (as ingress now forwards a raw key), several
keys interleaved over the events topic's partitions. When each run was inside its task
comes from ``flow_visits`` (the database's clock, written by the task itself).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
import uuid
from typing import Any

import asyncpg
import orjson

from router.settings import RouterSettings
from schemas import ids
from tests.support import kafka
from tests.support.routing import route_until_committed
from tests.support.runs import registry_with
from tests.support.wait import eventually

from .slot_handlers import FLOW_VISITS_DDL, flow_visit, insert_flow_activity


def _event(key: str, i: int, **data: Any) -> tuple[bytes, bytes, list[Any]]:
    eid = f"o-{uuid.uuid4().hex[:12]}"
    data = {"k": key, "i": i, **data}
    body = {"type": "test.event", "event_id": eid, "source": "t", "data": data}
    return key.encode(), orjson.dumps(body), []


async def _produce(cfg: Any, events: list[tuple[bytes, bytes, list[Any]]]) -> list[str]:
    await kafka.produce(cfg.kafka.bootstrap_servers, cfg.kafka.events_topic, events)
    return [orjson.loads(v)["event_id"] for _, v, _ in events]


def _registry(pool: asyncpg.Pool) -> Any:
    async def handler(ctx: Any) -> None:
        await flow_visit(pool, ctx)

    return registry_with(flow_visit=handler)


async def _visits(pool: asyncpg.Pool, aid: str) -> list[asyncpg.Record]:
    return list(
        await pool.fetch(
            "SELECT v.key, v.entered_at, v.exited_at, v.run_id, r.event_id FROM flow_visits v"
            " JOIN activity_runs r ON r.run_id::text = v.run_id"
            " WHERE r.activity_id = $1::uuid ORDER BY v.entered_at",
            aid,
        )
    )


async def _count(pool: asyncpg.Pool, aid: str, status: str) -> int:
    return int(
        await pool.fetchval(
            "SELECT count(*) FROM activity_runs WHERE activity_id = $1::uuid AND status = $2",
            aid,
            status,
        )
    )


def _assert_in_order(visits: list[asyncpg.Record], order: dict[str, int]) -> None:
    """Per key: entered in the events' order, each after the one before it exited."""
    by_key: dict[str, list[asyncpg.Record]] = {}
    for v in visits:
        by_key.setdefault(v["key"], []).append(v)
    for key, vs in by_key.items():
        assert [order[v["event_id"]] for v in vs] == sorted(order[v["event_id"]] for v in vs), key
        for before, after in itertools.pairwise(vs):
            assert before["exited_at"] <= after["entered_at"], (key, before, after)


async def test_each_key_runs_in_its_events_order_without_blocking_the_others(
    cfg, temporal, db_pool, slot_worker
):
    await db_pool.execute(FLOW_VISITS_DDL)
    aid = await insert_flow_activity(db_pool, {"ordered": {"key": "data.k"}})
    keys = {"slow": 0.8, "a": 0.1, "b": 0.1, "c": 0.1}
    events = [_event(k, i, hold=h) for i in range(5) for k, h in keys.items()]
    eids = await _produce(cfg, events)
    order = {e: i for i, e in enumerate(eids)}
    registry = _registry(db_pool)
    async with slot_worker(registry):
        rcfg = RouterSettings(group=f"o-{uuid.uuid4().hex[:8]}", commit_interval_ms=100)
        await route_until_committed(cfg, rcfg, temporal, db_pool)
        await eventually(lambda: _done(db_pool, aid, 20), 120, "20 runs succeeded")
        visits = await _visits(db_pool, aid)
        assert len(visits) == 20 and len({v["run_id"] for v in visits}) == 20
        _assert_in_order(visits, order)
        # Keys do not wait for each other: every fast key was done before the slow key's
        # last run entered (the slow line alone takes 5 x 0.8 s).
        slow_last = max(v["entered_at"] for v in visits if v["key"] == "slow")
        assert all(v["exited_at"] < slow_last for v in visits if v["key"] != "slow")

        # A replay of the whole topic without the ledger: every trigger gets its place
        # back (no second one) and Temporal refuses a second start: nothing runs twice.
        again = RouterSettings(group=f"o-{uuid.uuid4().hex[:8]}", ledger=False,
                               commit_interval_ms=100)  # fmt: skip
        replayed = await route_until_committed(cfg, again, temporal, db_pool)
        assert replayed.routing.stats.started == 0
        await asyncio.sleep(2)
        assert (
            await db_pool.fetchval(
                "SELECT count(*) FROM flow_order_places WHERE activity_id = $1::uuid", aid
            )
            == 20
        )
        assert len(await _visits(db_pool, aid)) == 20


async def _done(pool: asyncpg.Pool, aid: str, n: int) -> bool:
    return await _count(pool, aid, "succeeded") == n


async def test_a_failed_run_holds_its_line_until_released(cfg, temporal, db_pool, slot_worker):
    await db_pool.execute(FLOW_VISITS_DDL)
    aid = await insert_flow_activity(db_pool, {"ordered": {"key": "data.k"}})
    events = [_event("f", 0), _event("f", 1, fail=True), _event("f", 2), _event("g", 0)]
    eids = await _produce(cfg, events)
    registry = _registry(db_pool)
    async with slot_worker(registry):
        rcfg = RouterSettings(group=f"o-{uuid.uuid4().hex[:8]}", commit_interval_ms=100)
        await route_until_committed(cfg, rcfg, temporal, db_pool)
        await eventually(lambda: _has(db_pool, aid, "failed", 1), 60, "run f1 failed")
        await eventually(lambda: _has(db_pool, aid, "succeeded", 2), 60, "f0 and g0 succeeded")
        await asyncio.sleep(4)  # f2 would have run by now (its timer asks within 2 s)
        assert {v["event_id"] for v in await _visits(db_pool, aid)} == {eids[0], eids[1], eids[3]}

        listed = _ingest(cfg, "flow", "list", "--activity", aid, "--json")
        rows = [r for r in orjson.loads(listed)["keys"] if r["key"] == "f"]
        assert rows and rows[0]["order_head"] == "blocked" and rows[0]["order_waiting"] == 1

        out = _ingest(cfg, "flow", "release", aid, "--key", "f", "--by", "test-ops")
        assert f"released {ids.event_workflow_id(aid, eids[1])}" in out
        await eventually(lambda: _has(db_pool, aid, "succeeded", 3), 60, "f2 ran once released")
        assert await _count(db_pool, aid, "failed") == 1  # the failed run stays failed


async def _has(pool: asyncpg.Pool, aid: str, status: str, n: int) -> bool:
    return await _count(pool, aid, status) == n


def _ingest(cfg: Any, *args: str) -> str:
    flags = ["--database-url", cfg.database.url.get_secret_value()]
    if args[1] == "release":
        flags += ["--temporal-address", cfg.temporal.address, "--namespace", cfg.temporal.namespace]
    done = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ingest"), *args, *flags],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout
