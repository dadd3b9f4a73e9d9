"""A flow key the event lacks: the whole message goes to the DLQ (flow_key_missing), and
no activity subscribed to it starts, not even one without a flow."""

from __future__ import annotations

import uuid

from router.settings import RouterSettings
from tests.support import db, kafka
from tests.support.routing import route_until_committed


async def test_missing_key_dead_letters_the_message(cfg, temporal, db_pool):
    tag = uuid.uuid4().hex[:8]
    etype = f"key.{tag}"
    await db.seed_activity(db_pool, etype)  # no flow: would start if the message were routed
    await db.seed_activity(
        db_pool, etype, flow={"throttle": {"limit": 5, "period": "1s", "key": "data.customer"}}
    )
    await kafka.produce(
        cfg.kafka.bootstrap_servers,
        cfg.kafka.events_topic,
        [(b"k", db.event(etype, f"e-{tag}", other=1), [])],
    )
    router = await route_until_committed(
        cfg, RouterSettings(group=f"k-{tag}", commit_interval_ms=100), temporal, db_pool
    )
    assert (router.routing.stats.dlq, router.routing.stats.started) == (1, 0)
    [dead] = await kafka.read_all(cfg.kafka.bootstrap_servers, cfg.kafka.dlq_topic)
    headers = dict(dead.headers)
    assert headers["dlq_reason"] == b"flow_key_missing"
    assert b"flow.throttle.key 'data.customer'" in headers["dlq_detail"]
