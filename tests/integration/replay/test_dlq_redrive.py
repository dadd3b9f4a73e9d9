"""``ingest replay --dlq`` on the real stack: fixed messages go through, still-bad ones come
back with dlq_attempt + 1 and their first source coordinates, nothing is re-driven twice."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import orjson

from ingress.records import restamper
from ingress.settings import load_ingress_settings
from pipeline.runtime import Shutdown
from replay.dlq import DlqRedriver
from router.settings import RouterSettings
from schemas import ids
from tests.support import db, kafka, wait
from tests.support.routing import route_until_committed
from tests.support.temporal import exists


def _big_event(event_type: str, event_id: str | None) -> bytes:
    doc = {"type": event_type, "source": "test", "data": {"blob": "x" * 600}}
    if event_id:
        doc["event_id"] = event_id
    return orjson.dumps(doc)


def _new(after, before):  # type: ignore[no-untyped-def]
    """Records of ``after`` not in ``before`` (read_all orders by partition, not time)."""
    seen = {(m.partition, m.offset) for m in before}
    return [m for m in after if (m.partition, m.offset) not in seen]


def _h(msg, name: str) -> bytes | None:  # type: ignore[no-untyped-def]
    return dict(msg.headers).get(name)


def _required(msg: Any, name: str) -> bytes:
    """Header ``name`` of ``msg``, which every DLQ record carries."""
    value = _h(msg, name)
    assert value is not None, f"no {name} header: {msg.headers}"
    return value


async def _ingress_until_dead_lettered(cfg, n: int) -> None:  # type: ignore[no-untyped-def]
    """Run the real ingress with a 300-byte limit until ``n`` records reach the DLQ."""
    from ingress.service import run_ingress
    from ingress.settings import load_ingress_settings

    shutdown = Shutdown()
    icfg = load_ingress_settings(max_event_bytes=300, group=f"ing-{uuid.uuid4().hex[:8]}")
    task = asyncio.create_task(run_ingress(cfg, shutdown, config=icfg, serve=False))

    async def dead_lettered() -> bool:
        return len(await kafka.read_all(cfg.kafka.bootstrap_servers, cfg.kafka.dlq_topic, 300)) >= n

    try:
        await wait.eventually(dead_lettered, 60, f"{n} ingress DLQ records")
    finally:
        shutdown.trigger()
        assert await asyncio.wait_for(task, 30) == 0


async def test_dlq_redrive_after_a_fix(cfg, temporal, db_pool):
    k = cfg.kafka
    restamp = restamper(k, load_ingress_settings)
    aid = await db.seed_activity(db_pool, "doc.big")
    tag = uuid.uuid4().hex[:8]
    # Ingress rejections: one too large (fixed by raising the limit), one not JSON (never fixed).
    raw = await kafka.produce(
        k.bootstrap_servers,
        k.raw_topic,
        [(b"r1", _big_event("doc.big", None), []), (b"r2", b"{not json", [])],
    )
    await _ingress_until_dead_lettered(cfg, 2)
    # Router rejections: one too large for the router's limit, one without event_id.
    big_id = f"big-{tag}"
    await kafka.produce(
        k.bootstrap_servers,
        k.events_topic,
        [(b"e1", _big_event("doc.big", big_id), []), (b"e2", db.event("doc.big"), [])],
    )
    await route_until_committed(
        cfg,
        RouterSettings(group=f"r-{tag}", commit_interval_ms=100, max_event_bytes=300),
        temporal,
        db_pool,
    )
    before = await kafka.read_all(k.bootstrap_servers, k.dlq_topic)
    assert sorted(_required(m, "dlq_reason") for m in before) == [
        b"missing_event_id",
        b"not_json",
        b"too_large",
        b"too_large",
    ]
    events_before = await kafka.read_all(k.bootstrap_servers, k.events_topic)

    # The fix: default limits (1 MB) for ingress and router. Dry run first: nothing moves.
    group = f"dlq-{tag}"
    dry = await DlqRedriver(
        cfg,
        RouterSettings(),
        client=temporal,
        pool=db_pool,
        restamp=restamp,
        group=group,
        dry_run=True,
    ).run()
    assert dry.extra["dlq_read"] == 4 and dry.stats.would_start == 1
    assert dry.extra["to_events"] == 1 and dry.extra["returned_to_dlq"] == 2
    assert len(await kafka.read_all(k.bootstrap_servers, k.dlq_topic)) == 4

    report = await DlqRedriver(
        cfg, RouterSettings(), client=temporal, pool=db_pool, restamp=restamp, group=group
    ).run()
    assert report.complete
    assert report.extra["dlq_read"] == 4
    assert report.stats.started == 1  # the router's too_large event
    assert await exists(temporal, ids.event_workflow_id(aid, big_id))
    assert report.extra["to_events"] == 1  # the ingress too_large event, stamped
    assert report.extra["returned_to_dlq"] == 2

    events = await kafka.read_all(k.bootstrap_servers, k.events_topic)
    new = _new(events, events_before)
    assert len(new) == 1
    stamped = orjson.loads(new[0].value)
    # The same id ingress would have given it the first time (source coordinates).
    p, off = raw[0]
    assert stamped["event_id"] == ids.source_event_id(k.raw_topic, p, off)
    # Its raw key, as ingress keeps it on the events topic (flow.ordered's order key).
    assert new[0].key == b"r1"

    after = await kafka.read_all(k.bootstrap_servers, k.dlq_topic)
    back = _new(after, before)
    assert sorted(_required(m, "dlq_reason") for m in back) == [b"missing_event_id", b"not_json"]
    for m in back:
        assert _h(m, "dlq_attempt") == b"2"
        first = next(o for o in before if _h(o, "dlq_reason") == _h(m, "dlq_reason"))
        assert _h(m, "dlq_component") == _h(first, "dlq_component")
        for name in ("dlq_source_topic", "dlq_source_partition", "dlq_source_offset"):
            assert _h(m, name) == _h(first, name)
        assert m.value == first.value and m.key == first.key  # byte-for-byte
    not_json = next(m for m in back if _h(m, "dlq_reason") == b"not_json")
    assert _h(not_json, "dlq_source_topic") == k.raw_topic.encode()
    assert _h(not_json, "dlq_source_offset") == str(raw[1][1]).encode()

    # Run again: the fixed ones are not re-driven twice; only the attempt-2 records are read.
    # With --reason too_large they are carried forward unchanged, not re-driven.
    again = await DlqRedriver(
        cfg,
        RouterSettings(),
        client=temporal,
        pool=db_pool,
        restamp=restamp,
        group=group,
        reason="too_large",
    ).run()
    assert again.extra["dlq_read"] == 2 and again.extra["carried_forward"] == 2
    assert again.stats.started == 0 and again.extra["to_events"] == 0
    final = await kafka.read_all(k.bootstrap_servers, k.dlq_topic)
    carried = _new(final, after)
    assert sorted(_required(m, "dlq_attempt") for m in carried) == [b"2", b"2"]
    assert len(await kafka.read_all(k.bootstrap_servers, k.events_topic)) == len(events)


async def test_a_relay_dead_letter_is_carried_forward_not_routed(cfg, temporal, db_pool):
    """An outbox row the relay dead-lettered is an emit's message, not an event: a re-drive
    must not route it (it would start runs of a subscriber of its `type`)."""
    k = cfg.kafka
    etype = f"relay.{uuid.uuid4().hex[:8]}"
    aid = await db.seed_activity(db_pool, etype)
    body = db.event(etype, "emit-1")  # an emit whose body happens to look like an event
    headers = [
        ("dlq_reason", b"outbox_too_large"),
        ("dlq_component", b"relay"),
        ("dlq_source_topic", b"ingest.tasks"),
        ("dlq_source_outbox_id", b"task-1"),
        ("dlq_attempt", b"1"),
    ]
    await kafka.produce(k.bootstrap_servers, k.dlq_topic, [(b"task-1", body, headers)])
    report = await DlqRedriver(
        cfg,
        RouterSettings(),
        client=temporal,
        pool=db_pool,
        restamp=restamper(k, load_ingress_settings),
        group=f"redrive-{uuid.uuid4().hex[:8]}",
    ).run()
    assert report.extra["dlq_read"] == 1 and report.extra["carried_forward"] == 1
    assert report.stats.read == 0 and report.stats.started == 0
    assert not await exists(temporal, ids.event_workflow_id(aid, "emit-1"))
    dlq = await kafka.read_all(k.bootstrap_servers, k.dlq_topic)
    assert [(m.value, _h(m, "dlq_component")) for m in dlq] == [(body, b"relay")] * 2
