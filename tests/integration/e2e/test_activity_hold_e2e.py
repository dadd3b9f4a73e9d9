"""Holding an activity end to end: raw topic -> ingress -> router -> worker, on the real
Kafka, Temporal and PostgreSQL, with ``ingest activities resume`` run as an operator would.

Three activities subscribe to the same events: one ``flow.ordered`` by ``data.k``, one
plain, both paused; and one never paused. The first event of key ``a`` is routed before
the pause and is still inside its task (a gate) when the pause comes: it goes on, and the
runs behind it in its line wait. The other twelve events (keys a, b, c interleaved,
produced keyed by their entity) arrive while paused: their runs exist in Temporal and are
recorded ``held``, and none starts a task, even once the line's head has finished. After
the resume every event has run exactly once per activity, and each key of the ordered
activity in its events' order, one at a time.

When each run was inside its task comes from ``flow_visits`` (the database's clock,
written by the task itself). In ``e2e/``, so it is in the real-server subset
(``tests/conftest.py``): the hold relies on the server buffering a signal sent before the
workflow registers its handler, and on signals cutting timers short.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from typing import Any

import asyncpg
import orjson

from definitions import pause
from schemas import ids
from tests.integration.flow.slot_handlers import FLOW_VISITS_DDL, flow_visit, insert_flow_activity
from tests.integration.scheduler.test_cli import ingest
from tests.support import inprocess, kafka
from tests.support.runs import insert_activity, local_activity_types, registry_with
from tests.support.wait import eventually
from workers.flow.part import flow_part
from workers.parts import core_part

KEYS = ("a", "b", "c")
PER_KEY = 4  # events per key produced while paused (after key a's first)


def _event(key: str, i: int, **data: Any) -> tuple[bytes, bytes, list[Any]]:
    """A raw record keyed by its entity (ingress keeps the key on the events topic)."""
    body = {"type": "test.event", "event_id": f"h-{uuid.uuid4().hex[:12]}", "source": "t",
            "data": {"k": key, "i": i, "hold": 0.1, **data}}  # fmt: skip
    return key.encode(), orjson.dumps(body), []


def _event_id(record: tuple[bytes, bytes, list[Any]]) -> str:
    return str(orjson.loads(record[1])["event_id"])


async def _statuses(pool: asyncpg.Pool, aid: str) -> dict[str, int]:
    rows = await pool.fetch(
        "SELECT status, count(*) AS n FROM activity_runs WHERE activity_id = $1::uuid"
        " GROUP BY status",
        aid,
    )
    return {r["status"]: r["n"] for r in rows}


async def _visits(pool: asyncpg.Pool, aid: str) -> list[asyncpg.Record]:
    return list(
        await pool.fetch(
            "SELECT v.key, v.attempt, v.entered_at, v.exited_at, v.run_id, r.event_id"
            " FROM flow_visits v JOIN activity_runs r ON r.run_id::text = v.run_id"
            " WHERE r.activity_id = $1::uuid ORDER BY v.entered_at, v.id",
            aid,
        )
    )


async def _tasks_of(pool: asyncpg.Pool, aid: str) -> int:
    return int(
        await pool.fetchval(
            "SELECT count(*) FROM task_instances t JOIN activity_runs r USING (run_id)"
            " WHERE r.activity_id = $1::uuid",
            aid,
        )
    )


def _has(pool: asyncpg.Pool, aid: str, want: dict[str, int]) -> Any:
    async def check() -> bool:
        return await _statuses(pool, aid) == want

    return check


def _assert_in_order(visits: list[asyncpg.Record], order: dict[str, int]) -> None:
    """Per key: entered in the events' order, each after the one before it exited."""
    by_key: dict[str, list[asyncpg.Record]] = {}
    for v in visits:
        by_key.setdefault(v["key"], []).append(v)
    assert sorted(by_key) == list(KEYS)
    for key, vs in by_key.items():
        assert [order[v["event_id"]] for v in vs] == sorted(order[v["event_id"]] for v in vs), key
        for before, after in itertools.pairwise(vs):
            assert before["exited_at"] <= after["entered_at"], (key, before, after)


async def test_runs_of_a_paused_activity_are_held_then_run_once_in_order(
    cfg, topics, temporal, db_pool
):
    pool = db_pool
    await pool.execute(FLOW_VISITS_DDL)
    await pool.execute("INSERT INTO flow_gates VALUES ('head', false)")
    ordered = await insert_flow_activity(pool, {"ordered": {"key": "data.k"}})
    plain = await insert_flow_activity(pool, {})
    free = await insert_activity(pool, [{"type": "noop"}])  # never paused

    async def handler(ctx: Any) -> None:
        await flow_visit(pool, ctx)

    head = _event("a", 0, gate="head")
    held = [_event(k, i) for i in range(1, PER_KEY + 1) for k in KEYS]
    order = {_event_id(r): n for n, r in enumerate([head, *held])}
    n_all, n_held = 1 + len(held), len(held)
    tag = uuid.uuid4().hex[:8]
    registry = registry_with(flow_visit=handler)
    bootstrap = cfg.kafka.bootstrap_servers
    async with inprocess.pipeline(
        cfg, temporal, pool, tag, registry=registry, parts=(core_part, flow_part)
    ) as groups:
        await kafka.produce(bootstrap, topics.raw, [head])

        async def head_inside() -> bool:
            groups.assert_running()
            return len(await _visits(pool, ordered)) == 1 and len(await _visits(pool, plain)) == 1

        await eventually(head_inside, 120, "a0's runs inside their task")
        for aid in (ordered, plain):
            act = await pause.find(pool, aid)
            assert act is not None
            await pause.pause(pool, act, "e2e", "downstream outage")

        await kafka.produce(bootstrap, topics.raw, held)
        await eventually(_has(pool, free, {"succeeded": n_all}), 120, "the free activity's runs")
        await eventually(
            _has(pool, ordered, {"running": 1, "held": n_held}), 60, "ordered runs held"
        )
        await eventually(_has(pool, plain, {"running": 1, "held": n_held}), 60, "plain runs held")
        # The line's head finishes; the next run of its key has its turn but stays held.
        await pool.execute("UPDATE flow_gates SET open = true WHERE name = 'head'")
        await eventually(
            _has(pool, ordered, {"succeeded": 1, "held": n_held}), 60, "the head finished"
        )
        await eventually(_has(pool, plain, {"succeeded": 1, "held": n_held}), 60, "plain a0")
        await asyncio.sleep(3)  # time for a held run to start a task, if the hold let one
        groups.assert_running()
        for aid in (ordered, plain):
            assert await _statuses(pool, aid) == {"succeeded": 1, "held": n_held}
            assert await _tasks_of(pool, aid) == 1  # a0's task only
            assert len(await _visits(pool, aid)) == 1
        # Every held run's workflow exists (the trigger is recorded in Temporal).
        for r in held:
            wid = ids.event_workflow_id(ordered, _event_id(r))
            desc = await temporal.get_workflow_handle(wid).describe()
            assert desc.status is not None and desc.status.name == "RUNNING", wid
        _, out, _ = await ingest(cfg, "activities", "list", "--json")
        listed = {r["id"]: r for r in orjson.loads(out)}
        assert [listed[a]["held_runs"] for a in (ordered, plain, free)] == [n_held, n_held, 0]

        for aid in (ordered, plain):
            _, out, _ = await ingest(cfg, "activities", "resume", aid, "--actor", "e2e")
            assert f"{n_held} run(s) held, {n_held} resumed, 0 skipped" in out, out
            assert f"signalled {n_held} run(s)" in out, out
        # Every run's workflow to its end (an ordered run's row says succeeded before its
        # finish step closed its place and woke the next one).
        handles = [
            temporal.get_workflow_handle(ids.event_workflow_id(aid, e))
            for aid in (ordered, plain)
            for e in order
        ]
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 120)
        assert [(r["status"], r["tasks_succeeded"]) for r in results] == [
            ("succeeded", 1)
        ] * 2 * n_all
        a1 = ids.event_workflow_id(ordered, _event_id(held[0]))
        kinds = await local_activity_types(temporal.get_workflow_handle(a1))

    # The line's second run waited for its turn, then for the resume.
    assert kinds.index("flow_order_turn") < kinds.index("hold_check"), kinds
    for aid in (ordered, plain):
        assert await _statuses(pool, aid) == {"succeeded": n_all}
        visits = await _visits(pool, aid)
        assert sorted(v["event_id"] for v in visits) == sorted(order)  # each event once
        assert {v["attempt"] for v in visits} == {1}
        assert await _tasks_of(pool, aid) == n_all
    _assert_in_order(await _visits(pool, ordered), order)
    assert await pool.fetchval(
        "SELECT count(*) FROM flow_order_places WHERE activity_id = $1::uuid AND done_at IS NULL",
        ordered,
    ) == 0  # fmt: skip
    audit = await pool.fetch(
        "SELECT action, actor, held, skipped FROM activity_pauses WHERE activity_id = $1::uuid"
        " ORDER BY id",
        ordered,
    )
    assert [tuple(a) for a in audit] == [("pause", "e2e", 0, 0), ("resume", "e2e", n_held, 0)]


async def test_skipping_the_held_runs_of_an_ordered_activity_frees_their_line(
    cfg, topics, temporal, db_pool
):
    """``resume --skip-held``: every held run of the line ends skipped with no task, its
    place closed, so the key's next event runs at once instead of waiting behind them."""
    pool = db_pool
    await pool.execute(FLOW_VISITS_DDL)
    ordered = await insert_flow_activity(pool, {"ordered": {"key": "data.k"}})
    act = await pause.find(pool, ordered)
    assert act is not None
    await pause.pause(pool, act, "e2e", None)

    async def handler(ctx: Any) -> None:
        await flow_visit(pool, ctx)

    held = [_event("a", i) for i in range(3)]
    async with inprocess.pipeline(
        cfg, temporal, pool, uuid.uuid4().hex[:8],
        registry=registry_with(flow_visit=handler),
        parts=(core_part, flow_part),
    ) as groups:  # fmt: skip
        await kafka.produce(cfg.kafka.bootstrap_servers, topics.raw, held)
        await eventually(_has(pool, ordered, {"held": 3}), 120, "the line's runs held")
        _, out, _ = await ingest(cfg, "activities", "resume", ordered, "--skip-held")
        assert "3 run(s) held, 0 resumed, 3 skipped" in out, out
        handles = [
            temporal.get_workflow_handle(ids.event_workflow_id(ordered, _event_id(r))) for r in held
        ]
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 120)
        assert [r["status"] for r in results] == ["skipped"] * 3
        after = _event("a", 3)
        await kafka.produce(cfg.kafka.bootstrap_servers, topics.raw, [after])
        handle = temporal.get_workflow_handle(ids.event_workflow_id(ordered, _event_id(after)))
        await eventually(_has(pool, ordered, {"skipped": 3, "succeeded": 1}), 60, "a3 ran")
        done = await asyncio.wait_for(handle.result(), 60)
        groups.assert_running()

    assert done["status"] == "succeeded"
    # Its turn at once: the skipped places are closed (no turn round of its own).
    assert "flow_order_turn" not in await local_activity_types(handle)
    visits = await _visits(pool, ordered)
    assert [v["event_id"] for v in visits] == [_event_id(after)]
    places = await pool.fetch(
        "SELECT outcome FROM flow_order_places WHERE activity_id = $1::uuid"
        " AND done_at IS NOT NULL",
        ordered,
    )
    assert sorted(p["outcome"] for p in places) == ["skipped"] * 3 + ["succeeded"]
