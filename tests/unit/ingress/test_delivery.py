"""deliver(): retry retriable failures, DLQ what Kafka finds too large, fail on the rest."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.errors import (
    KafkaConnectionError,
    MessageSizeTooLargeError,
    NotLeaderForPartitionError,
    RecordTooLargeError,
    TopicAuthorizationFailedError,
)

from ingress.delivery import DrainTimeout, FatalProduceError, deliver
from ingress.records import Outgoing, transform
from ingress.stamping import SourceStrategy
from tests.unit.ingress.helpers import TransformKw, record

KW: TransformKw = {
    "strategy": SourceStrategy(),
    "events_topic": "ev",
    "dlq_topic": "dlq",
    "max_bytes": 10**6,
}


class FakeProducer:
    """Fails the n-th send (at send time or on the future) as scripted."""

    PARTITIONS = 3

    def __init__(self, script: dict[int, tuple[str, BaseException]] | None = None) -> None:
        self.script = script or {}
        self.calls = 0
        self.sent: list[tuple[str, bytes | None, bytes | None]] = []
        self.partitions: list[int | None] = []

    async def partitions_for(self, topic):
        return set(range(self.PARTITIONS))

    async def send(self, topic, value=None, key=None, headers=None, partition=None):
        self.partitions.append(partition)
        n = self.calls
        self.calls += 1
        where, exc = self.script.get(n, ("", None))
        if where == "send":
            assert exc is not None
            raise exc
        fut: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        if where == "future":
            assert exc is not None
            fut.set_exception(exc)
        else:
            self.sent.append((topic, key, value))
            fut.set_result(None)
        return fut


class FakeBatch:
    def __init__(self) -> None:
        self.items: list[tuple[bytes | None, bytes | None]] = []
        self.closed = False

    def append(self, *, timestamp, key, value, headers):
        assert not self.closed
        self.items.append((key, value))
        return object()

    def close(self) -> None:
        self.closed = True


class BatchingProducer(FakeProducer):
    """Also takes closed batches; ``bscript`` fails the n-th batch's future."""

    def __init__(self, script=None, bscript: dict[int, BaseException] | None = None) -> None:
        super().__init__(script)
        self.bscript = bscript or {}
        self.batches: list[tuple[str, int, list[tuple[bytes | None, bytes | None]]]] = []

    def create_batch(self) -> FakeBatch:
        return FakeBatch()

    async def send_batch(self, batch: FakeBatch, topic: str, *, partition: int):
        assert batch.closed
        fut: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        exc = self.bscript.get(len(self.batches))
        self.batches.append((topic, partition, batch.items))
        if exc is not None:
            fut.set_exception(exc)
        else:
            self.sent.extend((topic, k, v) for k, v in batch.items)
            fut.set_result(None)
        return fut


def key_of(r: Outgoing) -> bytes:
    """The key of a stamped event (never None)."""
    assert r.key is not None
    return r.key


def recs(n: int) -> list[Outgoing]:
    return [transform(record(b'{"type":"t"}', offset=i), **KW) for i in range(n)]


async def run(
    producer: FakeProducer,
    records: list[Outgoing],
    give_up=lambda: False,
    batch_record_max=-1,
    clock=lambda: 0.0,
):
    """``batch_record_max=-1``: every record goes on its own (the per-record path).
    ``clock``: the rounds take no time unless a test's clock says so."""
    acked: list[Outgoing] = []
    sleeps: list[float] = []

    async def sleep(s: float) -> None:
        sleeps.append(s)

    await deliver(
        producer,
        records,
        dlq_topic="dlq",
        on_acked=acked.extend,
        give_up=give_up,
        sleep=sleep,
        clock=clock,
        backoff_min=0.1,
        backoff_max=0.3,
        batch_record_max=batch_record_max,
    )
    return acked, sleeps


async def test_all_acked_first_time() -> None:
    acked, sleeps = await run(FakeProducer(), recs(3))
    assert [r.source.offset for r in acked] == [0, 1, 2] and sleeps == []


async def test_retriable_failures_are_resent_with_backoff_only_the_failed_ones() -> None:
    p = FakeProducer(
        {
            1: ("future", NotLeaderForPartitionError()),
            3: ("future", NotLeaderForPartitionError()),
            4: ("future", NotLeaderForPartitionError()),
            5: ("future", NotLeaderForPartitionError()),
        }
    )
    acked, sleeps = await run(p, recs(3))
    assert sorted(r.source.offset for r in acked) == [0, 1, 2]
    assert len(p.sent) == 3  # nothing produced twice
    assert sleeps == [0.1, 0.2, 0.3, 0.3]  # doubling, capped


async def test_a_round_that_waited_out_the_broker_is_retried_without_the_whole_delay() -> None:
    """The delay spaces the rounds' starts: a round that took 0.25 s to fail (a request
    timeout on a cut link) waits 0.05 s of a 0.3-s delay, one that took 1 s none."""

    class Slow(FakeProducer):
        now = 0.0
        took = iter([0.05, 0.25, 1.0, 0.0, 0.0])  # the first round ends in 0.05 s

        async def send(self, topic, value=None, key=None, headers=None, partition=None):
            Slow.now += next(Slow.took)
            return await super().send(topic, value, key, headers, partition)

    err = NotLeaderForPartitionError
    p = Slow({0: ("future", err()), 1: ("future", err()), 2: ("future", err())})
    acked, sleeps = await run(p, recs(1), clock=lambda: Slow.now)
    assert len(acked) == 1 and len(p.sent) == 1
    assert sleeps == [pytest.approx(0.05), pytest.approx(0.0), 0.0]  # of 0.1, 0.2, 0.3


async def test_send_time_connection_error_stops_the_round() -> None:
    p = FakeProducer({0: ("send", KafkaConnectionError())})
    acked, sleeps = await run(p, recs(4))
    assert p.calls == 5  # 1 failed send, then all 4 again: the rest did not wait it out
    assert len(acked) == 4 and sleeps == [0.1]


async def test_too_large_event_becomes_a_dlq_record() -> None:
    p = FakeProducer({0: ("future", MessageSizeTooLargeError())})
    acked, _ = await run(p, recs(1))
    assert acked[0].topic == "dlq" and acked[0].reason == "too_large"
    assert p.sent[0][2] == b'{"type":"t"}'  # the original bytes


async def test_too_large_dlq_record_goes_without_its_value() -> None:
    p = FakeProducer(
        {0: ("future", MessageSizeTooLargeError()), 1: ("send", MessageSizeTooLargeError())}
    )
    acked, _ = await run(p, recs(1))
    assert acked[0].value is None and ("dlq_value_omitted", b"1") in acked[0].headers


async def test_fatal_error_raises() -> None:
    p = FakeProducer({1: ("future", TopicAuthorizationFailedError())})
    with pytest.raises(FatalProduceError):
        await run(p, recs(2))


async def test_give_up_during_shutdown_raises_drain_timeout() -> None:
    p = FakeProducer({i: ("send", KafkaConnectionError()) for i in range(100)})
    with pytest.raises(DrainTimeout):
        await run(p, recs(2), give_up=lambda: True)


async def test_keyed_records_get_the_crc32_partition_explicitly():
    from pipeline.kafka import key_partition

    producer = FakeProducer()
    records = recs(6)
    await run(producer, records)
    assert producer.partitions == [
        key_partition(key_of(r), FakeProducer.PARTITIONS) for r in records
    ]


# -- the batched path (what the service uses) -----------------------------------


async def test_records_go_as_one_closed_batch_per_partition() -> None:
    from pipeline.kafka import key_partition

    p = BatchingProducer()
    records = recs(12)
    acked, sleeps = await run(p, records, batch_record_max=10**6)
    assert p.calls == 0 and sorted(r.source.offset for r in acked) == list(range(12))
    want: dict[int, list[bytes | None]] = {}
    for r in records:
        want.setdefault(key_partition(key_of(r), FakeProducer.PARTITIONS), []).append(r.key)
    got = {part: [k for k, _ in items] for _, part, items in p.batches}
    assert got == want and len(p.batches) == len(want) and sleeps == []  # order kept


async def test_a_batch_failing_retriably_is_resent_as_a_batch() -> None:
    p = BatchingProducer(bscript={0: NotLeaderForPartitionError()})
    acked, sleeps = await run(p, recs(1), batch_record_max=10**6)
    assert len(p.batches) == 2 and len(acked) == 1 and sleeps == [0.1] and p.calls == 0


async def test_a_batch_refused_as_too_large_is_split_and_only_the_culprit_dead_lettered() -> None:
    # The batch of 2 is refused; sent one by one, record 1 alone is too large.
    p = BatchingProducer({1: ("future", MessageSizeTooLargeError())}, {0: RecordTooLargeError()})
    p.PARTITIONS = 1
    acked, sleeps = await run(p, recs(2), batch_record_max=10**6)
    kinds = sorted((r.topic, r.reason) for r in acked)
    assert kinds == [("dlq", "too_large"), ("ev", None)] and sleeps == []
    assert len(p.batches) == 1 and p.calls == 3  # the keyless DLQ copy went on its own


async def test_a_batch_refused_for_good_fails_per_record() -> None:
    p = BatchingProducer({0: ("future", TopicAuthorizationFailedError())})
    p.bscript = {0: TopicAuthorizationFailedError()}
    with pytest.raises(FatalProduceError):
        await run(p, recs(1), batch_record_max=10**6)


async def test_large_and_keyless_records_go_on_their_own() -> None:
    big = transform(record(b'{"type":"t","data":"' + b"x" * 100 + b'"}', offset=9), **KW)
    keyless = transform(record(b"not json", offset=10), **KW)  # DLQ copy of a keyless message
    p = BatchingProducer()
    acked, _ = await run(p, [*recs(2), big, keyless], batch_record_max=100)
    assert p.calls == 2 and sum(len(items) for *_, items in p.batches) == 2
    assert sorted(r.source.offset for r in acked) == [0, 1, 9, 10]


def test_a_record_over_record_max_is_shrunk_before_it_is_sent() -> None:
    """Found by tests/fuzz: a raw record of ~1 MB of headers made a DLQ copy the broker
    refused, which broke the idempotent producer's sequence (OutOfOrderSequenceNumber) and
    crash-looped ingress. Now no record over ``record_max`` leaves: a stamped event becomes
    its DLQ record, which loses its value, then the producer's key and headers."""
    from ingress.delivery import _fit, record_bytes

    headers = [("h", b"x" * 5000), ("dlq_source_offset", b"999")]
    good = transform(record(b'{"type":"t","data":{}}', headers=headers, offset=7), **KW)
    assert good.reason is None and good.topic == "ev"
    fitted = _fit(good, 2000, "dlq")
    assert fitted.topic == "dlq" and fitted.reason == "too_large" and fitted.value is None
    hd = dict(fitted.headers)
    assert "h" not in hd and hd["dlq_headers_omitted"] == b"1"
    assert hd["dlq_source_offset"] == b"7", "its own coordinates, not a producer's header"
    assert fitted.key == f"{good.source.topic}/{good.source.partition}@7".encode()
    assert record_bytes(fitted) <= 2000
    assert _fit(good, 10_000, "dlq") is good


def test_a_keyless_record_shrunk_to_no_value_gets_its_coordinates_as_key() -> None:
    """Found by tests/fuzz: a keyless raw record over the limit, its DLQ copy without its
    value had neither key nor value, which aiokafka refuses (an AssertionError that
    crash-looped ingress)."""
    from ingress.delivery import _fit

    big = transform(record(b"x" * 5000, offset=3), **KW)  # keyless, not JSON
    assert big.key is None and big.reason == "not_json"
    fitted = _fit(big, 2000, "dlq")
    assert fitted.value is None and fitted.key == f"{big.source.topic}/0@3".encode()
    assert dict(fitted.headers)["dlq_value_omitted"] == b"1"


def test_a_record_without_key_and_value_gets_a_dlq_copy_aiokafka_can_send() -> None:
    """Found by tests/fuzz: librdkafka produces a record with neither key nor value;
    its DLQ copy had neither either, which aiokafka refuses (ingress crash-looped)."""
    out = transform(record(None, offset=5), **KW)
    assert out.reason == "not_json" and out.value is None
    assert out.key == f"{out.source.topic}/0@5".encode()
    keyed = transform(record(None, key=b"k", offset=6), **KW)  # a tombstone keeps its key
    assert keyed.key == b"k"
