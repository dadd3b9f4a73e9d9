"""The router against real Kafka, Temporal and PostgreSQL (no worker: starts are what we check)."""

from __future__ import annotations

import uuid

from router.settings import RouterSettings
from schemas import ids
from tests.support import db, kafka, metrics, routing
from tests.support import temporal as tsupport


async def test_routes_dedupes_and_dead_letters(cfg, temporal, db_pool):
    a1 = await db.seed_activity(db_pool, "order.created")
    a2 = await db.seed_activity(db_pool, "order.created")
    await db.seed_activity(db_pool, "order.created", enabled=False)
    await db.seed_activity(db_pool, "other.type")
    tag = uuid.uuid4().hex[:8]
    unique = [f"e-{tag}-{i}" for i in range(20)]
    msgs: list[tuple[bytes, bytes, list[tuple[str, bytes]]]] = [
        (e.encode(), db.event("order.created", e, n=i), []) for i, e in enumerate(unique)
    ]
    redelivered = unique[:5]
    msgs += [(e.encode(), db.event("order.created", e), []) for e in redelivered]
    msgs += [
        (b"x", db.event("order.created"), []),  # no event_id
        (b"y", b"{not json", []),
        (b"z", db.event("nobody.listens", f"u-{tag}"), []),
    ]
    await kafka.produce(cfg.kafka.bootstrap_servers, cfg.kafka.events_topic, msgs)
    dup_before = metrics.router_duplicates(missing_ok=True)

    rcfg = RouterSettings(group=f"g-{tag}", commit_interval_ms=100)
    router = await routing.route_until_committed(cfg, rcfg, temporal, db_pool)

    expected = {ids.event_workflow_id(a, e) for a in (a1, a2) for e in unique}
    assert router.routing.stats.started == len(expected)
    for wid in expected:
        assert await tsupport.exists(temporal, wid), wid
        desc = await temporal.get_workflow_handle(wid).describe()
        assert desc.workflow_type == "RunActivityWorkflow"
        assert desc.task_queue == cfg.temporal.task_queue
    rows = await db_pool.fetch("SELECT workflow_id FROM routed_triggers")
    assert {r["workflow_id"] for r in rows} == expected

    # Each redelivered event is suppressed once per subscribed activity, no more.
    assert metrics.router_duplicates() - dup_before == len(redelivered) * 2

    dlq = await kafka.read_all(cfg.kafka.bootstrap_servers, cfg.kafka.dlq_topic)
    reasons = sorted(dict(m.headers)["dlq_reason"].decode() for m in dlq)
    assert reasons == ["missing_event_id", "not_json"]
    bad = next(m for m in dlq if dict(m.headers)["dlq_reason"] == b"not_json")
    assert bad.value == b"{not json" and bad.key == b"y"
    assert dict(bad.headers)["dlq_source_topic"] == cfg.kafka.events_topic.encode()
    assert router.routing.stats.unmatched == 1


async def test_replaying_the_topic_with_a_new_group_starts_nothing(cfg, temporal, db_pool):
    a1 = await db.seed_activity(db_pool, "t")
    tag = uuid.uuid4().hex[:8]
    evs = [f"r-{tag}-{i}" for i in range(30)]
    await kafka.produce(
        cfg.kafka.bootstrap_servers,
        cfg.kafka.events_topic,
        [(e.encode(), db.event("t", e), []) for e in evs],
    )
    first = await routing.route_until_committed(
        cfg, RouterSettings(group=f"a-{tag}", commit_interval_ms=100), temporal, db_pool
    )
    assert first.routing.stats.started == 30
    second = await routing.route_until_committed(
        cfg, RouterSettings(group=f"b-{tag}", commit_interval_ms=100), temporal, db_pool
    )
    assert second.routing.stats.started == 0
    assert second.routing.stats.ledger_duplicates == 30
    # Without the ledger, Temporal's REJECT_DUPLICATE absorbs them.
    third = await routing.route_until_committed(
        cfg,
        RouterSettings(group=f"c-{tag}", commit_interval_ms=100, ledger=False),
        temporal,
        db_pool,
    )
    assert third.routing.stats.started == 0
    assert third.routing.stats.temporal_duplicates == 30
    assert await tsupport.exists(temporal, ids.event_workflow_id(a1, evs[0]))
