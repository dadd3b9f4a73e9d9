"""Windows against Temporal's 2 MB blob limit on real Kafka, Temporal and PostgreSQL (issue 34,
item 5): a batch closes by bytes before its run could be refused, and a window whose run
cannot be carried or is refused sends every member to the DLQ with its source coordinates,
never forgotten and never retried for ever.

Each member is about 30 KB of JSON; 100 of them (3 MB) under ``max_size: 100`` were one
batch that Temporal refused, and were lost.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import orjson
import pytest
from temporalio.client import WorkflowExecutionStatus

from pipeline import metrics as m
from router.settings import RouterSettings
from schemas import ids
from tests.integration.flow.support import runs, seed_flow_activity, windows
from tests.support import db, kafka
from tests.support.outbox import read_committed, running_relay
from tests.support.routing import route_until_committed
from tests.support.runs import worker_factory
from tests.support.wait import eventually
from workers.flow.part import flow_part
from workers.parts import core_part

PAD = 30_000  # bytes of random hex per event: about 30 KB of JSON each
BATCH = {"batch": {"max_size": 100, "timeout": "2s"}}


def _event(etype: str, eid: str, i: int, pad: int = PAD) -> bytes:
    return db.event(etype, eid, n=i, pad=os.urandom(pad // 2).hex())


async def _states(pool: Any, aid: str) -> list[tuple[str, str | None]]:
    rows = await pool.fetch(
        "SELECT state, closed_by FROM flow_windows WHERE activity_id = $1::uuid ORDER BY id", aid
    )
    return [(r["state"], r["closed_by"]) for r in rows]


async def _settled(temporal: Any, pool: Any, aid: str) -> None:
    """Until no window of the activity is open and its window workflow has ended (it ends
    once it has no window left: each was started, dead-lettered or, before the fix,
    forgotten)."""
    handle = temporal.get_workflow_handle(ids.window_workflow_id(aid, ids.NO_KEY))

    async def done() -> bool:
        if any(s == "open" for s, _ in await _states(pool, aid)):
            return False
        return (await handle.describe()).status != WorkflowExecutionStatus.RUNNING

    await eventually(done, 90, "every window closed and the window workflow ended")


def _dead(reason: str) -> float:
    return m.DLQ_MESSAGES.labels(component="worker", reason=reason)._value.get()  # type: ignore[attr-defined]


async def _route(cfg: Any, temporal: Any, pool: Any) -> Any:
    group = f"live-{uuid.uuid4().hex[:8]}"
    return await route_until_committed(
        cfg, RouterSettings(group=group, commit_interval_ms=100), temporal, pool, timeout=90
    )


async def _burst(cfg, etype: str, prefix: str) -> tuple[list[str], list[tuple[int, int]]]:  # type: ignore[no-untyped-def]
    """100 events of ~30 KB under one key (one partition, in the order sent): ids, coords."""
    evs = [f"{prefix}-{uuid.uuid4().hex[:8]}-{i}" for i in range(100)]
    sent = await kafka.produce(
        cfg.kafka.bootstrap_servers,
        cfg.kafka.events_topic,
        [(b"k", _event(etype, e, i), []) for i, e in enumerate(evs)],
    )
    return evs, sent


async def test_100_events_of_30_kb_close_by_bytes_and_all_run(cfg, temporal, db_pool):
    etype = f"t.bytes.{uuid.uuid4().hex[:6]}"
    aid = await seed_flow_activity(db_pool, etype, BATCH)
    evs, sent = await _burst(cfg, etype, "w")
    assert len({p for p, _ in sent}) == 1
    worker = worker_factory(cfg, temporal, db_pool)
    async with worker(parts=(core_part, flow_part)):
        await _route(cfg, temporal, db_pool)
        await _settled(temporal, db_pool, aid)
        states = await _states(db_pool, aid)
        assert {s for s, _ in states} == {"started"}, states

        async def done() -> bool:
            rows = await runs(db_pool, aid)
            return len(rows) == len(states) and all(r["status"] == "succeeded" for r in rows)

        await eventually(done, 90, "every batch run to succeed")
    got = await windows(db_pool, aid)
    # each event in exactly one batch, in the order sent
    assert [e for w in got for e in w["members"]] == evs
    # 30 KB each against the 1.5 MB budget: batches of 49 closed by bytes (a 50th would
    # take them over), the rest by timeout
    assert [w["closed_by"] for w in got] == ["bytes", "bytes", "timeout"], got
    assert [w["size"] for w in got] == [49, 49, 2]
    byte_rows = await db_pool.fetch(
        "SELECT bytes FROM flow_windows WHERE activity_id = $1::uuid ORDER BY id", aid
    )
    assert all(r["bytes"] <= 1_500_000 for r in byte_rows), byte_rows
    assert all(r["bytes"] + 31_000 > 1_500_000 for r in byte_rows[:2])  # the next did not fit
    # every run saw its batch
    for t in await db_pool.fetch("SELECT payload FROM task_instances"):
        payload = orjson.loads(t["payload"])
        wid = payload["trigger"]["workflow_id"]
        (w,) = [w for w in got if w["run_workflow_id"] == wid]
        assert [e["event_id"] for e in payload["events"]] == w["members"]


async def test_a_member_no_run_can_carry_goes_to_the_dlq_and_the_others_run(cfg, temporal, db_pool):
    """Three tasks each carry the batch: one 800 KB event makes a 2.4 MB plan, which the
    worker could never record (the run would stay running for ever), so it is dead-lettered
    alone, with its coordinates; the small events before and after it run."""
    etype = f"t.bytes.{uuid.uuid4().hex[:6]}"
    aid = await seed_flow_activity(db_pool, etype, BATCH, [{"type": "noop"}] * 3)
    tag = uuid.uuid4().hex[:8]
    small = [f"s-{tag}-{i}" for i in range(6)]
    big = f"big-{tag}"
    msgs: list[tuple[bytes, bytes, list[tuple[str, bytes]]]] = [
        (b"k", _event(etype, e, i, pad=1_000), []) for i, e in enumerate(small[:3])
    ]
    msgs.append((b"k", _event(etype, big, 3, pad=800_000), []))
    msgs += [(b"k", _event(etype, e, i, pad=1_000), []) for i, e in enumerate(small[3:], 4)]
    sent = await kafka.produce(cfg.kafka.bootstrap_servers, cfg.kafka.events_topic, msgs)
    too_large = _dead("window_too_large")
    worker = worker_factory(cfg, temporal, db_pool)
    try:
        async with running_relay(cfg), worker(parts=(core_part, flow_part)):
            await _route(cfg, temporal, db_pool)
            await _settled(temporal, db_pool, aid)
            (dead,) = await read_committed(cfg.kafka.bootstrap_servers, cfg.kafka.dlq_topic, 1, 60)

            async def done() -> bool:
                rows = await runs(db_pool, aid)
                return len(rows) == 2 and all(r["status"] == "succeeded" for r in rows)

            await eventually(done, 60, "the two batches of small events to succeed")
    finally:
        await _terminate_runs(temporal, db_pool, aid)
    headers = dict(dead.headers)
    assert headers["dlq_reason"] == b"window_too_large"
    assert headers["dlq_component"] == b"worker"
    partition, offset = sent[3]
    assert (headers["dlq_source_topic"], headers["dlq_source_partition"]) == (
        cfg.kafka.events_topic.encode(),
        str(partition).encode(),
    )
    assert headers["dlq_source_offset"] == str(offset).encode()
    assert b"3 tasks" in headers["dlq_detail"], headers["dlq_detail"]
    body = orjson.loads(dead.value)
    assert body["event_id"] == big and len(body["data"]["pad"]) == 800_000
    assert _dead("window_too_large") == too_large + 1
    states = await _states(db_pool, aid)
    assert sorted(states) == [
        ("dead_lettered", "bytes"),
        ("started", "bytes"),
        ("started", "timeout"),
    ]
    # the dead window keeps no member: a re-drive of the DLQ record assigns it again
    got = await windows(db_pool, aid)
    assert [w["members"] for w in got] == [small[:3], small[3:]]


async def test_a_window_temporal_refuses_goes_to_the_dlq_member_by_member(
    cfg, temporal, db_pool, monkeypatch: pytest.MonkeyPatch
):
    """With the byte budget and the worker's own check lifted (a window assigned before
    them, or a server whose blob limit is lower than the SDK's), Temporal refuses the
    3 MB start for good: every member goes to the DLQ, none is lost or retried for ever."""
    monkeypatch.setattr("schemas.flow.spec.WINDOW_MAX_BYTES", 100_000_000, raising=False)
    monkeypatch.setattr("schemas.flow.spec.BLOB_LIMIT", 100_000_000, raising=False)
    etype = f"t.bytes.{uuid.uuid4().hex[:6]}"
    aid = await seed_flow_activity(db_pool, etype, BATCH)
    evs, sent = await _burst(cfg, etype, "r")
    refused = _dead("window_start_refused")
    worker = worker_factory(cfg, temporal, db_pool)
    async with running_relay(cfg), worker(parts=(core_part, flow_part)):
        await _route(cfg, temporal, db_pool)
        await _settled(temporal, db_pool, aid)
        dead = await read_committed(cfg.kafka.bootstrap_servers, cfg.kafka.dlq_topic, 100, 90)
    assert await _states(db_pool, aid) == [("dead_lettered", "full")]
    assert await runs(db_pool, aid) == []
    assert sorted(orjson.loads(d.value)["event_id"] for d in dead) == sorted(evs)
    assert {d.key for d in dead} == {e.encode() for e in evs}  # keyed by event id
    where = {e: (p, o) for e, (p, o) in zip(evs, sent, strict=True)}
    for d in dead:
        h = dict(d.headers)
        assert h["dlq_reason"] == b"window_start_refused"
        assert b"INVALID_ARGUMENT" in h["dlq_detail"] or b"size" in h["dlq_detail"], h
        p, o = where[orjson.loads(d.value)["event_id"]]
        assert (h["dlq_source_partition"], h["dlq_source_offset"]) == (
            str(p).encode(),
            str(o).encode(),
        )
    assert _dead("window_start_refused") == refused + 100


async def _terminate_runs(temporal: Any, pool: Any, aid: str) -> None:
    """Before the fix, the run of the 800 KB batch stays running for ever: end it, so the
    test leaves nothing running on the shared server."""
    for r in await runs(pool, aid):
        if r["status"] == "running":
            try:
                await temporal.get_workflow_handle(r["workflow_id"]).terminate("test cleanup")
            except Exception:  # already closed
                pass
