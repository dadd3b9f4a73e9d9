"""Transactional ingress against the real broker: exactly once for read_committed readers.

* Events and DLQ records of a run appear once each to a ``read_committed`` reader, and the
  group's raw offsets are committed to the end, by the transactions alone (never by the
  consumer).
* A zombie is fenced: ingress A holds a transaction open (the test-only delay between
  producing and committing), ingress B joins the same group and takes the partitions over.
  B's producer, initialised with the same per-partition ``transactional_id``, aborts A's
  open transactions; A's late commit is refused. A reader sees every event exactly once
  although A had produced some of them.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import ProducerFenced

from ingress.records import Outgoing
from ingress.service import run_ingress
from ingress.settings import IngressSettings
from ingress.transactions import PartitionProducers
from pipeline import kafka
from pipeline.runtime import Shutdown
from schemas.ids import ingress_transactional_id, source_event_id
from tests.support.kafka import partitions, produce, unfinished
from tests.support.wait import eventually


async def read_committed(bootstrap: str, topic: str, idle_ms: int = 1500) -> list[Any]:
    """Every committed message of ``topic`` up to its last stable offset."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in sorted(await partitions(consumer, topic))]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        end = await consumer.end_offsets(tps)  # read_committed: the last stable offsets
        out: list[Any] = []
        while any([await consumer.position(tp) < end[tp] for tp in tps]):
            for msgs in (await consumer.getmany(timeout_ms=idle_ms)).values():
                out.extend(msgs)
        return out
    finally:
        await consumer.stop()


def _config(group: str, **kw: Any) -> IngressSettings:
    return IngressSettings(group=group, transactional=True, lag_interval_seconds=0.2, **kw)


async def test_transactional_ingress_writes_each_event_once(cfg, topics, stack) -> None:
    group = f"txi-{uuid.uuid4()}"
    values: list[tuple[bytes, bytes, list[tuple[str, bytes]]]] = [
        (f"k{i}".encode(), orjson.dumps({"type": "a", "i": i}), []) for i in range(300)
    ]
    values.append((b"bad", b"not json", []))
    coords = await produce(stack.kafka, topics.raw, values)
    shutdown = Shutdown()
    task = asyncio.create_task(
        run_ingress(cfg, shutdown, config=_config(group, transaction_records=50), serve=False)
    )
    try:
        await eventually(
            lambda: _done(stack.kafka, group, topics.raw), 60, "ingress to commit everything"
        )
    finally:
        shutdown.trigger()
        code = await asyncio.wait_for(task, 30)
    assert code == 0
    events = await read_committed(stack.kafka, topics.events)
    dlq = await read_committed(stack.kafka, topics.dlq)
    good = [(p, o) for (p, o), (_, v, _h) in zip(coords, values, strict=True) if v != b"not json"]
    ids = Counter(orjson.loads(m.value)["event_id"] for m in events)
    assert set(ids) == {source_event_id(topics.raw, p, o) for p, o in good}
    assert max(ids.values()) == 1
    assert len(dlq) == 1 and dict(dlq[0].headers)["dlq_reason"] == b"not_json"
    for m in events + dlq:
        assert m.headers  # plain records, not transaction markers


async def test_the_next_owner_fences_a_zombie(cfg, topics, stack) -> None:
    """A zombie (a previous owner of raw partition 0, still running) has produced events and
    its offsets in an open transaction. The next owner's assignment fences it: the zombie's
    commit is refused, none of its records is visible to read_committed, the committed
    offset is where it was, and the new owner's own transaction commits."""
    group, k = f"txz-{uuid.uuid4()}", cfg.kafka
    tp = TopicPartition(topics.raw, 0)
    msgs = await produce(stack.kafka, topics.raw, [(b"k", b"{}", [], 0)] * 3)
    zombie = kafka.producer(k, transactional_id=ingress_transactional_id(group, tp.topic, 0))
    await zombie.start()
    consumer = kafka.consumer(k, group_id=group)
    owner = PartitionProducers(
        group, lambda tid: kafka.producer(k, transactional_id=tid), revoke_wait=5
    )
    try:
        await zombie.begin_transaction()
        await zombie.send_offsets_to_transaction({tp: 3}, group)
        await (await zombie.send(topics.events, b'{"zombie": true}', key=b"z", partition=0))
        consumer.assign([tp])
        await consumer.start()
        await owner.assign(consumer, {tp})
        with pytest.raises(ProducerFenced):
            await zombie.commit_transaction()
        assert await consumer.committed(tp) is None
        assert await read_committed(stack.kafka, topics.events) == []

        fetched = (await consumer.getmany(tp, timeout_ms=5000))[tp]
        assert [m.offset for m in fetched] == [o for _, o in msgs]

        async def send(producer: Any, records: list[Outgoing]) -> None:
            await (await producer.send(topics.events, b'{"owner": true}', key=b"o", partition=0))

        recs = [Outgoing(m, topics.events, b"o", b"{}", []) for m in fetched]
        assert await owner.transact(consumer, tp, owner.generation(tp) or 0, fetched, recs, send)
    finally:
        await owner.close()
        await consumer.stop()
        await zombie.stop()
    assert [m.value for m in await read_committed(stack.kafka, topics.events)] == [
        b'{"owner": true}'
    ]
    assert await _committed(stack.kafka, group, tp) == 3


async def _committed(bootstrap: str, group: str, tp: TopicPartition) -> int | None:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
    await consumer.start()
    try:
        return await consumer.committed(tp)
    finally:
        await consumer.stop()


async def _done(bootstrap: str, group: str, topic: str) -> bool:
    return not await unfinished(bootstrap, group, topic)
