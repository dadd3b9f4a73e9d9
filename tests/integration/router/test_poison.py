"""Records a broker accepts and PostgreSQL cannot store, through the live router (issue 34).

Each one went through the router of main at cd84527 and stopped it: a NUL in an
``event_id`` failed the batch's ledger lookup (22021) and the router exited; a
3,000-character random throttle key or ``event_id`` failed the flow tables' primary
keys (54000) and a NUL in a debounced event's data failed jsonb (22P05), and those
messages' offsets stayed pending for good. Now each is dead-lettered with its reason,
the good events after it on the same partitions start, and the group commits to the end.
"""

from __future__ import annotations

import random
import string
import uuid

import orjson

from router.settings import RouterSettings
from schemas import ids
from tests.support import db, kafka
from tests.support.routing import route_until_committed
from tests.support.temporal import exists


def _random(n: int, seed: int) -> str:
    # Random letters: a key of one repeated letter is compressed by PostgreSQL and fits.
    return "".join(random.Random(seed).choices(string.ascii_letters + string.digits, k=n))


async def test_poison_records_are_dead_lettered_and_the_rest_runs(cfg, temporal, db_pool):
    tag = uuid.uuid4().hex[:8]
    plain, throttled, debounced = f"p.{tag}", f"t.{tag}", f"d.{tag}"
    a_plain = await db.seed_activity(db_pool, plain)
    a_thr = await db.seed_activity(
        db_pool, throttled, flow={"throttle": {"limit": 100, "period": "1s", "key": "data.k"}}
    )
    await db.seed_activity(db_pool, debounced, flow={"debounce": {"period": "30s"}})

    def doc(etype: str, eid: str, **data: object) -> bytes:
        return orjson.dumps({"event_id": eid, "type": etype, "source": "x", "data": data})

    poison = [  # (value, expected dlq_reason)
        (doc(plain, "poison\x00", order_id="o-1"), "bad_id"),
        (doc(throttled, f"k-{tag}", k=_random(3000, 1)), "bad_flow_key"),
        (doc(throttled, _random(3000, 2), k="a"), "bad_id"),
        (doc(debounced, f"n-{tag}", note="a\x00b"), "nul_character"),
        (doc(throttled, f"c-{tag}", k="a\nb"), "bad_flow_key"),
    ]
    good = [f"g-{tag}-{i}" for i in range(12)]
    records: list[tuple[None, bytes, list[tuple[str, bytes]]]] = [(None, v, []) for v, _ in poison]
    records += [
        (None, doc(plain if i % 2 else throttled, e, k="a"), []) for i, e in enumerate(good)
    ]
    coords = await kafka.produce(cfg.kafka.bootstrap_servers, cfg.kafka.events_topic, records)

    group = f"poison-{tag}"
    router = await route_until_committed(
        cfg, RouterSettings(group=group, commit_interval_ms=100), temporal, db_pool
    )

    dlq = await kafka.read_all(cfg.kafka.bootstrap_servers, cfg.kafka.dlq_topic)
    got = {}
    for m in dlq:
        hd = dict(m.headers)
        got[(int(hd["dlq_source_partition"]), int(hd["dlq_source_offset"]))] = (
            hd["dlq_reason"].decode(),
            m.value,
        )
    want = {c: (reason, value) for c, (value, reason) in zip(coords, poison, strict=False)}
    assert got == want, "each poison record in the DLQ once, with its reason and bytes"
    assert router.routing.stats.dlq == len(poison)
    for i, e in enumerate(good):
        wid = ids.event_workflow_id(a_plain if i % 2 else a_thr, e)
        assert await exists(temporal, wid), f"the good event {e} after the poison started"


async def test_a_dead_letter_the_dlq_refuses_for_size_goes_without_its_value(
    cfg, temporal, db_pool
):
    """The DLQ topic's ``max.message.bytes`` below the event: the DLQ record is sent
    without its value (``dlq_value_omitted``) instead of stopping the partition."""
    from pipeline.clients import ensure_topics

    tag = uuid.uuid4().hex[:8]
    dlq = f"dlq-small-{tag}"
    await ensure_topics(cfg.kafka, [dlq], 1, configs={"max.message.bytes": "20000"})
    small = cfg.model_copy(update={"kafka": cfg.kafka.model_copy(update={"dlq_topic": dlq})})
    etype = f"p.{tag}"
    aid = await db.seed_activity(db_pool, etype)
    big = orjson.dumps(
        {"type": etype, "event_id": f"big-{tag}", "data": {"x": "a" * 60_000 + "\x00"}}
    )
    after = f"after-{tag}"
    coords = await kafka.produce(
        cfg.kafka.bootstrap_servers,
        cfg.kafka.events_topic,
        [(b"k", big, []), (b"k", db.event(etype, after), [])],  # one key: one partition
    )
    await route_until_committed(
        small, RouterSettings(group=f"big-{tag}", commit_interval_ms=100), temporal, db_pool
    )
    (m,) = await kafka.read_all(cfg.kafka.bootstrap_servers, dlq)
    hd = dict(m.headers)
    assert m.value is None and hd["dlq_value_omitted"] == b"1"
    assert hd["dlq_reason"] == b"nul_character"
    assert (int(hd["dlq_source_partition"]), int(hd["dlq_source_offset"])) == coords[0]
    assert await exists(temporal, ids.event_workflow_id(aid, after))


async def test_an_event_too_large_for_one_subscribers_run_still_runs_the_other(
    cfg, temporal, db_pool
):
    """A 700 KB event: a 3-task activity's plan would be 2.1 MB (over Temporal's 2 MB blob
    limit, a run that stays running for ever), a 1-task activity's fits. The first is
    dead-lettered ``run_too_large``, the second starts."""
    tag = uuid.uuid4().hex[:8]
    etype = f"big.{tag}"
    three = await db.seed_activity(db_pool, etype, tasks=[{"type": "noop"}] * 3)
    one = await db.seed_activity(db_pool, etype)
    eid = f"big-{tag}"
    value = orjson.dumps({"event_id": eid, "type": etype, "data": {"blob": _random(700_000, 3)}})
    (coords,) = await kafka.produce(
        cfg.kafka.bootstrap_servers, cfg.kafka.events_topic, [(None, value, [])]
    )
    await route_until_committed(
        cfg, RouterSettings(group=f"big-{tag}", commit_interval_ms=100), temporal, db_pool
    )
    (m,) = await kafka.read_all(cfg.kafka.bootstrap_servers, cfg.kafka.dlq_topic)
    hd = dict(m.headers)
    assert hd["dlq_reason"] == b"run_too_large" and m.value == value
    assert three.encode() in hd["dlq_detail"] and one.encode() not in hd["dlq_detail"]
    assert (int(hd["dlq_source_partition"]), int(hd["dlq_source_offset"])) == coords
    assert await exists(temporal, ids.event_workflow_id(one, eid))
    assert not await exists(temporal, ids.event_workflow_id(three, eid))
