"""Ingress against the real broker: stamping, keying, DLQ, commits."""

from __future__ import annotations

import asyncio
import uuid

import orjson

from ingress.service import run_ingress
from ingress.settings import IngressSettings
from pipeline.runtime import Shutdown
from schemas.ids import cloudevent_event_id, source_event_id
from tests.support.kafka import produce, read_until, unfinished

CE = [
    ("ce_specversion", b"1.0"),
    ("ce_id", b"bin-1"),
    ("ce_source", b"/bin"),
    ("ce_type", b"bin.type"),
]


def j(doc: object) -> bytes:
    return orjson.dumps(doc)


GOOD = [  # (key, value, headers, partition, expected event_id or None = source-stamped)
    (b"k1", j({"type": "a", "data": {"n": 1}}), [("trace", b"t1")], 0, None),
    (b"k2", j({"type": "a", "event_id": "keep-me"}), [], 1, "keep-me"),
    (
        None,
        j({"specversion": "1.0", "id": "ce-9", "source": "/s", "type": "b"}),
        [],
        2,
        cloudevent_event_id("/s", "ce-9"),
    ),
    (b"k4", j({"n": 4}), CE, 0, cloudevent_event_id("/bin", "bin-1")),
    (b"k5", j({"type": "a"}), [], 1, None),
    (None, j({"type": "a", "event_id": ""}), [], 2, None),
]
BAD = [  # (key, value, headers, partition, reason)
    (b"b1", b"not json at all", [("trace", b"x")], 0, "not_json"),
    (b"b2", b"[1,2,3]", [], 1, "not_object"),
    (b"b3", j({"data": 1}), [], 2, "missing_type"),
    (None, b"\xff\xfe\x00", [], 0, "invalid_utf8"),
    (
        b"b5",
        j({"specversion": "0.3", "id": "1", "source": "s", "type": "t"}),
        [],
        1,
        "unsupported_specversion",
    ),
    (b"b6", None, [], 2, "not_json"),
]


async def test_ingress_stamps_keys_and_dead_letters(cfg, topics, stack) -> None:
    group = f"ingress-{uuid.uuid4()}"
    coords = await produce(stack.kafka, topics.raw, [g[:4] for g in GOOD + BAD])
    shutdown = Shutdown()
    task = asyncio.create_task(
        run_ingress(
            cfg,
            shutdown,
            config=IngressSettings(group=group, lag_interval_seconds=0.2),
            serve=False,
        )
    )
    try:
        events = await read_until(stack.kafka, topics.events, len(GOOD))
        dlq = await read_until(stack.kafka, topics.dlq, len(BAD))
    finally:
        shutdown.trigger()
        code = await asyncio.wait_for(task, 30)
    assert code == 0

    # every good message exactly once, stamped as expected, keyed by its raw key (a
    # keyless one by its event_id)
    assert len(events) == len(GOOD)
    by_source = {dict(m.headers)["ingress_source"].decode(): m for m in events}
    for (key, _value, headers, _p, expected), (part, off) in zip(GOOD, coords, strict=False):
        msg = by_source[f"{topics.raw}/{part}/{off}"]
        doc = orjson.loads(msg.value)
        want = expected or source_event_id(topics.raw, part, off)
        assert doc["event_id"] == want
        assert msg.key == (key if key is not None else want.encode())
        h = dict(msg.headers)
        assert h["ingress_stamp"] == (b"source" if expected is None else b"existing")
        for name, v in headers:
            if not name.startswith("ce_"):
                assert h[name] == v
    binary = orjson.loads(by_source[f"{topics.raw}/{coords[3][0]}/{coords[3][1]}"].value)
    assert binary == {
        "event_id": cloudevent_event_id("/bin", "bin-1"),
        "type": "bin.type",
        "source": "/bin",
        "data": {"n": 4},
        "extensions": {"specversion": "1.0", "id": "bin-1"},
    }

    # malformed: the original bytes, the reason in a header
    assert len(dlq) == len(BAD)
    by_offset = {
        (int(dict(m.headers)["dlq_source_partition"]), int(dict(m.headers)["dlq_source_offset"])): m
        for m in dlq
    }
    for (key, value, headers, _p, reason), coord in zip(BAD, coords[len(GOOD) :], strict=True):
        msg = by_offset[coord]
        h = dict(msg.headers)
        assert (msg.key, msg.value) == (key, value)
        assert h["dlq_reason"] == reason.encode()
        assert h["dlq_component"] == b"ingress"
        assert h["dlq_source_topic"] == topics.raw.encode()
        for name, v in headers:
            assert h[name] == v

    # metrics: lag is refreshed from the committed offsets, stamping is counted
    from prometheus_client import REGISTRY

    lag = REGISTRY.get_sample_value(
        "pipeline_consumer_lag", {"component": "ingress", "topic": topics.raw, "partition": "0"}
    )
    assert lag in (0.0, None)  # None: removed when the partition was released at shutdown
    consumed = REGISTRY.get_sample_value(
        "pipeline_events_consumed_total", {"component": "ingress", "topic": topics.raw}
    )
    assert consumed == len(GOOD) + len(BAD)

    # offsets committed up to the end of every raw partition
    assert await unfinished(stack.kafka, group, topics.raw) == {}


async def test_header_strategy_and_missing_header(cfg, topics, stack) -> None:
    group = f"ingress-{uuid.uuid4()}"
    await produce(
        stack.kafka,
        topics.raw,
        [
            (None, j({"type": "a"}), [("x-event-id", b"hdr-1")], 0),
            (None, j({"type": "a"}), [], 0),
            (None, j({"type": "a", "event_id": "body-id"}), [("x-event-id", b"ignored")], 0),
        ],
    )
    shutdown = Shutdown()
    task = asyncio.create_task(
        run_ingress(
            cfg,
            shutdown,
            config=IngressSettings(group=group, strategy="header:x-event-id"),
            serve=False,
        )
    )
    try:
        events = await read_until(stack.kafka, topics.events, 2)
        dlq = await read_until(stack.kafka, topics.dlq, 1)
    finally:
        shutdown.trigger()
        assert await asyncio.wait_for(task, 30) == 0
    assert sorted(orjson.loads(m.value)["event_id"] for m in events) == ["body-id", "hdr-1"]
    assert [dict(m.headers)["dlq_reason"] for m in dlq] == [b"missing_event_id_header"]


async def test_multiple_raw_topics(stack, topics) -> None:
    from pipeline import settings
    from pipeline.clients import ensure_topics

    second = f"{topics.raw}-b"
    kcfg = settings.KafkaSettings(bootstrap_servers=stack.kafka)
    await ensure_topics(kcfg, [second], 1)
    cfg = settings.load_settings(
        kafka__bootstrap_servers=stack.kafka,
        kafka__raw_topic=f"{topics.raw},{second}",
        kafka__events_topic=topics.events,
        kafka__dlq_topic=topics.dlq,
        process__metrics_port=0,
    )
    await produce(stack.kafka, topics.raw, [(None, j({"type": "a"}), [], 0)])
    await produce(stack.kafka, second, [(None, j({"type": "a"}), [], 0)])
    shutdown = Shutdown()
    task = asyncio.create_task(
        run_ingress(cfg, shutdown, config=IngressSettings(group=f"g-{uuid.uuid4()}"), serve=False)
    )
    try:
        events = await read_until(stack.kafka, topics.events, 2)
    finally:
        shutdown.trigger()
        assert await asyncio.wait_for(task, 30) == 0
    assert {orjson.loads(m.value)["event_id"] for m in events} == {
        source_event_id(topics.raw, 0, 0),
        source_event_id(second, 0, 0),
    }
