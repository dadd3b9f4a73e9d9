"""The event size limit at its boundary, through the real ingress, router and worker.

An event ingress accepts is never dead-lettered by the router for its size: ingress
applies the one limit (``INGEST_MAX_EVENT_BYTES``, default 1,000,000) to the event it
stamps, not only to the raw message it read.
"""

from __future__ import annotations

import uuid

import orjson

from schemas.envelope import MAX_EVENT_BYTES
from tests.support import db, inprocess, kafka, wait

# What stamping adds to a body without an id: "event_id":"<36-character UUID>",
STAMP = len(b'"event_id":""') + 36 + len(b",")


def sized(event_type: str, size: int, event_id: str | None = None) -> bytes:
    """One event of our JSON form, exactly ``size`` bytes long."""
    body = db.event(event_type, event_id, pad="")
    body = db.event(event_type, event_id, pad="x" * (size - len(body)))
    assert len(body) == size
    return body


async def test_no_event_ingress_accepts_is_too_large_for_the_router(cfg, topics, temporal, db_pool):
    tag = uuid.uuid4().hex[:8]
    etype = f"big.{tag}"
    activity_id = await db.seed_activity(db_pool, etype)
    limit = MAX_EVENT_BYTES  # the default, as the issue met it
    the_issue = sized(etype, 999_990)  # no id: 1,000,040 bytes once stamped
    at_limit = sized(etype, limit - STAMP)  # no id: exactly the limit once stamped
    own_id = sized(etype, limit, f"own-{tag}")  # has an id: forwarded at exactly the limit
    bootstrap = cfg.kafka.bootstrap_servers
    await kafka.produce(
        bootstrap, topics.raw, [(None, v, []) for v in (the_issue, at_limit, own_id)]
    )

    async def runs() -> list[str]:
        rows = await db_pool.fetch(
            "SELECT status FROM activity_runs WHERE activity_id = $1::uuid", activity_id
        )
        return sorted(r["status"] for r in rows)

    async with inprocess.pipeline(cfg, temporal, db_pool, tag) as groups:

        async def done() -> bool:
            return await runs() == ["succeeded", "succeeded"] and await kafka.caught_up(
                bootstrap, groups.router, topics.events
            )

        await wait.eventually(done, 120, "the two events that fit to run")
        settled = await wait.quiet(runs, "activity_runs")

    assert settled == ["succeeded", "succeeded"]
    (dead,) = await kafka.read_all(bootstrap, topics.dlq)  # only the one ingress refused
    headers = dict(dead.headers)
    assert (headers["dlq_component"], headers["dlq_reason"]) == (b"ingress", b"too_large")
    assert (
        headers["dlq_detail"]
        == f"stamped {999_990 + STAMP} bytes exceeds the {limit}-byte limit".encode()
    )
    assert dead.value == the_issue
    events = await kafka.read_all(bootstrap, topics.events)
    assert sorted(len(m.value) for m in events) == [limit, limit]
    assert {orjson.loads(m.value)["event_id"] for m in events} >= {f"own-{tag}"}
