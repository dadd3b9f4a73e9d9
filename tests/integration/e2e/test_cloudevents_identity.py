"""CloudEvents from the official SDK (``cloudevents.kafka``), through the real pipeline.

A CloudEvent is identified by ``source`` + ``id`` (CloudEvents 1.0): the same
``id`` from two sources is two events and two runs; the same event delivered
again, in binary mode (``ce_*`` headers) or structured mode (JSON), is one run.
The producer side is the SDK's own rendering, not ours.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson
from cloudevents.http import CloudEvent
from cloudevents.kafka import KafkaMessage, to_binary, to_structured

from schemas import ids
from tests.support import db, inprocess, kafka, metrics, wait


def _record(message: KafkaMessage) -> tuple[bytes | None, bytes, list[tuple[str, bytes]]]:
    """An SDK Kafka message as (key, value, headers) for aiokafka."""
    key = message.key.encode() if isinstance(message.key, str) else message.key
    value = message.value.encode() if isinstance(message.value, str) else message.value
    return key, value, list(message.headers.items())


async def test_cloudevents_are_one_run_per_source_and_id(cfg, topics, temporal, db_pool):
    tag = uuid.uuid4().hex[:8]
    etype = f"order.created.{tag}"
    activity_id = await db.seed_activity(db_pool, etype)
    ce_id = f"ce-{tag}"  # one id, sent by two producers
    json_data = {"type": etype, "datacontenttype": "application/json"}
    a = CloudEvent({**json_data, "id": ce_id, "source": f"/producer-a/{tag}"}, {"n": "a"})
    b = CloudEvent({**json_data, "id": ce_id, "source": f"/producer-b/{tag}"}, {"n": "b"})
    bootstrap = cfg.kafka.bootstrap_servers

    async def runs() -> list[tuple[str, str]]:
        rows = await db_pool.fetch(
            "SELECT workflow_id, status FROM activity_runs WHERE activity_id = $1::uuid",
            activity_id,
        )
        return sorted((r["workflow_id"], r["status"]) for r in rows)

    async with inprocess.pipeline(cfg, temporal, db_pool, tag) as groups:
        # First delivery: producer A in binary mode, producer B in structured mode.
        await kafka.produce(
            bootstrap, topics.raw, [_record(to_binary(a)), _record(to_structured(b))]
        )

        async def two_finished() -> bool:
            got = await runs()
            return len(got) >= 2 and all(status == "succeeded" for _, status in got)

        await wait.eventually(two_finished, 90, "both producers' runs to finish")
        first = await runs()
        dups_before = metrics.router_duplicates(missing_ok=True)

        # Delivered again: each event in the other mode, then in the same mode once more.
        again = [to_structured(a), to_binary(b), to_binary(a), to_structured(b)]
        await kafka.produce(bootstrap, topics.raw, [_record(m) for m in again])

        async def routed() -> bool:
            return await kafka.caught_up(
                bootstrap, groups.ingress, topics.raw
            ) and await kafka.caught_up(bootstrap, groups.router, topics.events)

        await wait.eventually(routed, 60, "ingress and router to commit every redelivery")
        settled = await wait.quiet(runs, "activity_runs after the redeliveries")

    assert len(first) == 2  # the same id from two sources: two runs
    assert settled == first  # six deliveries of two events: still those two runs
    assert {wid for wid, _ in first} == {
        ids.event_workflow_id(activity_id, ids.cloudevent_event_id(e["source"], ce_id))
        for e in (a, b)
    }
    assert metrics.router_duplicates() - dups_before == len(again)

    # Both renderings of one event were stamped with the same event_id, and it keeps
    # the producer's id and source.
    stamped: dict[str, list[dict[str, Any]]] = {}
    for m in await kafka.read_all(bootstrap, topics.events):
        doc = orjson.loads(m.value)
        stamped.setdefault(doc["event_id"], []).append(doc)
    assert sorted(len(docs) for docs in stamped.values()) == [3, 3]
    for docs in stamped.values():
        assert {(d["source"], d["extensions"]["id"]) for d in docs} in (
            {(a["source"], ce_id)},
            {(b["source"], ce_id)},
        )
