"""Transactional ingress's own logic, with fake clients: the order of each transaction's
steps, the fence before the committed offset is read, aborts, revokes and ownership.

The broker's side (fencing, aborted records invisible to read_committed) is checked against
the real broker in tests/integration/ingress/test_transactional.py and on three brokers in
tests/faults/test_transactional_ingress.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka.errors import ProducerFenced
from aiokafka.structs import TopicPartition

from ingress.records import Outgoing
from ingress.settings import load_ingress_settings
from ingress.transactions import PartitionProducers, chunks
from pipeline.settings import ConfigError
from schemas.ids import ingress_transactional_id
from tests.unit.ingress.helpers import record

TP = TopicPartition("raw", 3)


class FakeProducer:
    def __init__(self, tid: str, calls: list[Any]) -> None:
        self.tid, self.calls = tid, calls
        self.fail_send: BaseException | None = None

    async def start(self) -> None:
        self.calls.append(("start", self.tid))

    async def begin_transaction(self) -> None:
        self.calls.append(("begin", self.tid))

    async def abort_transaction(self) -> None:
        self.calls.append(("abort", self.tid))

    async def commit_transaction(self) -> None:
        self.calls.append(("commit", self.tid))

    async def send_offsets_to_transaction(self, offsets: Any, group: str) -> None:
        self.calls.append(("offsets", dict(offsets), group))

    async def stop(self) -> None:
        self.calls.append(("stop", self.tid))


class FakeConsumer:
    def __init__(self, calls: list[Any], committed: int | None) -> None:
        self.calls, self._committed = calls, committed

        self.pool: PartitionProducers | None = None

    async def committed(self, tp: TopicPartition) -> int | None:
        # While the committed offset is read, the partition is not ours to commit yet: a
        # batch fetched meanwhile (from the consumer's own, earlier lookup) must be dropped.
        assert self.pool is None or self.pool.generation(tp) is None
        self.calls.append(("committed", tp))
        return self._committed

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.calls.append(("seek", tp, offset))

    async def seek_to_beginning(self, tp: TopicPartition) -> None:
        self.calls.append(("seek_to_beginning", tp))

    async def position(self, tp: TopicPartition) -> int:
        return 0

    def pause(self, *tps: TopicPartition) -> None:
        self.calls.append(("pause", *tps))

    def resume(self, *tps: TopicPartition) -> None:
        self.calls.append(("resume", *tps))


def _pool(calls: list[Any], revoke_wait: float = 1.0) -> tuple[PartitionProducers, dict]:
    made: dict[str, FakeProducer] = {}

    def make(tid: str) -> Any:
        made[tid] = FakeProducer(tid, calls)
        return made[tid]

    return PartitionProducers("grp", make, revoke_wait), made


def _msgs(first: int, n: int) -> tuple[list[Any], list[Outgoing]]:
    msgs = [
        record(b"{}", topic=TP.topic, partition=TP.partition, offset=first + i) for i in range(n)
    ]
    return msgs, [Outgoing(m, "events", b"k", b"{}", []) for m in msgs]


def test_the_transactional_id_is_pinned_one_per_partition() -> None:
    # Never change this format: a process with another would not fence one with this one.
    assert ingress_transactional_id("ingest-ingress", "ingest.raw", 0) == (
        "ingest-ingress:ingest-ingress:ingest.raw:0"
    )
    ids = {ingress_transactional_id("g", "t", p) for p in range(6)}
    assert len(ids) == 6
    with pytest.raises(ValueError):
        ingress_transactional_id("", "t", 0)


def test_chunks_split_a_partition_in_order() -> None:
    msgs, recs = _msgs(10, 5)
    got = [(m[0].offset, m[-1].offset, len(r)) for m, r in chunks(msgs, recs, 2)]
    assert got == [(10, 11, 2), (12, 13, 2), (14, 14, 1)]


def test_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_ingress_settings().transactional is False
    monkeypatch.setenv("INGEST_INGRESS_TRANSACTIONAL", "true")
    monkeypatch.setenv("INGEST_INGRESS_TRANSACTION_RECORDS", "250")
    cfg = load_ingress_settings()
    assert (cfg.transactional, cfg.transaction_records) == (True, 250)
    monkeypatch.setenv("INGEST_INGRESS_TRANSACTION_RECORDS", "0")
    with pytest.raises(ConfigError, match="INGEST_INGRESS_TRANSACTION_RECORDS"):
        load_ingress_settings()


async def test_assignment_fences_before_it_reads_the_committed_offset() -> None:
    calls: list[Any] = []
    pool, _ = _pool(calls)
    consumer = FakeConsumer(calls, committed=42)
    consumer.pool = pool
    await pool.assign(consumer, {TP})  # type: ignore[arg-type]
    tid = ingress_transactional_id("grp", TP.topic, TP.partition)
    assert calls == [
        ("pause", TP),  # nothing fetched from the consumer's own, earlier lookup is returned
        ("start", tid),
        ("begin", tid),  # waits for InitProducerId: the fence
        ("abort", tid),
        ("committed", TP),
        ("seek", TP, 42),
        ("resume", TP),
    ]
    assert (pool.generation(TP), pool.start_offset(TP)) == (1, 42)


async def test_without_a_committed_offset_the_partition_starts_at_its_beginning() -> None:
    calls: list[Any] = []
    pool, _ = _pool(calls)
    await pool.assign(FakeConsumer(calls, committed=None), {TP})  # type: ignore[arg-type]
    assert ("seek_to_beginning", TP) in calls
    assert pool.start_offset(TP) == 0


async def test_a_transaction_sends_the_offsets_first_then_the_records_then_commits() -> None:
    calls: list[Any] = []
    pool, _ = _pool(calls)
    consumer = FakeConsumer(calls, committed=None)
    await pool.assign(consumer, {TP})  # type: ignore[arg-type]
    calls.clear()
    msgs, recs = _msgs(7, 3)
    sent: list[list[Outgoing]] = []

    async def send(producer: Any, records: list[Outgoing]) -> None:
        calls.append(("send", len(records)))
        sent.append(records)

    ok = await pool.transact(consumer, TP, 1, msgs, recs, send)  # type: ignore[arg-type]
    tid = ingress_transactional_id("grp", TP.topic, TP.partition)
    assert ok
    assert calls == [("begin", tid), ("offsets", {TP: 10}, "grp"), ("send", 3), ("commit", tid)]


async def test_a_failed_transaction_aborts_and_seeks_back() -> None:
    calls: list[Any] = []
    pool, _ = _pool(calls)
    consumer = FakeConsumer(calls, committed=None)
    await pool.assign(consumer, {TP})  # type: ignore[arg-type]
    calls.clear()
    msgs, recs = _msgs(7, 3)

    async def send(producer: Any, records: list[Outgoing]) -> None:
        raise RuntimeError("broker refused")

    with pytest.raises(RuntimeError):
        await pool.transact(consumer, TP, 1, msgs, recs, send)  # type: ignore[arg-type]
    tid = ingress_transactional_id("grp", TP.topic, TP.partition)
    assert calls[-2:] == [("abort", tid), ("seek", TP, 7)]
    assert ("commit", tid) not in calls


async def test_nothing_is_sent_for_a_partition_no_longer_ours() -> None:
    calls: list[Any] = []
    pool, _ = _pool(calls)
    consumer = FakeConsumer(calls, committed=None)
    msgs, recs = _msgs(0, 2)

    async def send(producer: Any, records: list[Outgoing]) -> None:
        raise AssertionError("must not send")

    assert not await pool.transact(consumer, TP, 1, msgs, recs, send)  # type: ignore[arg-type]
    await pool.assign(consumer, {TP})  # type: ignore[arg-type]
    await pool.release({TP})
    await pool.assign(consumer, {TP})  # assigned again: generation 2
    calls.clear()
    # A chunk fetched under the first assignment is never committed under the second.
    assert not await pool.transact(consumer, TP, 1, msgs, recs, send)  # type: ignore[arg-type]
    assert calls == []


async def test_revoke_waits_for_the_transaction_in_flight_then_stops() -> None:
    calls: list[Any] = []
    pool, _ = _pool(calls)
    consumer = FakeConsumer(calls, committed=None)
    await pool.assign(consumer, {TP})  # type: ignore[arg-type]
    msgs, recs = _msgs(0, 2)
    release = asyncio.Event()

    async def send(producer: Any, records: list[Outgoing]) -> None:
        await release.wait()

    txn = asyncio.create_task(pool.transact(consumer, TP, 1, msgs, recs, send))  # type: ignore[arg-type]
    await asyncio.sleep(0.01)
    revoking = asyncio.create_task(pool.release({TP}))
    await asyncio.sleep(0.01)
    tid = ingress_transactional_id("grp", TP.topic, TP.partition)
    assert ("stop", tid) not in calls
    release.set()
    assert await txn
    await revoking
    assert calls[-2:] == [("commit", tid), ("stop", tid)]


async def test_fenced_after_the_revoke_is_expected_and_fenced_while_ours_is_fatal() -> None:
    calls: list[Any] = []
    pool, _ = _pool(calls, revoke_wait=0.01)
    consumer = FakeConsumer(calls, committed=None)
    await pool.assign(consumer, {TP})  # type: ignore[arg-type]
    msgs, recs = _msgs(0, 2)
    go = asyncio.Event()

    async def fenced_later(producer: Any, records: list[Outgoing]) -> None:
        await go.wait()
        raise ProducerFenced()

    txn = asyncio.create_task(pool.transact(consumer, TP, 1, msgs, recs, fenced_later))  # type: ignore[arg-type]
    await asyncio.sleep(0.01)
    await pool.release({TP})  # times out: the transaction is left to the next owner
    go.set()
    assert await txn is False
    await pool.close()

    await pool.assign(consumer, {TP})  # type: ignore[arg-type]

    async def fenced(producer: Any, records: list[Outgoing]) -> None:
        raise ProducerFenced()

    with pytest.raises(ProducerFenced):
        await pool.transact(consumer, TP, 2, msgs, recs, fenced)  # type: ignore[arg-type]
