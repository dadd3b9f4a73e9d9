"""The ingress loop with two batches overlapping, on a fake consumer and producer.

What must hold whatever the overlap: a raw offset is committed only once its
record and every record fetched before it on its partition are acknowledged;
batch N+1 is produced only after batch N is fully acknowledged; a fatal produce
error commits nothing more.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka.errors import TopicAuthorizationFailedError
from aiokafka.structs import ConsumerRecord, TopicPartition

from ingress import service
from ingress.records import H_SOURCE, Outgoing, transform_all
from ingress.service import Ingress
from ingress.settings import load_ingress_settings
from pipeline import settings
from pipeline.runtime import Shutdown
from tests.unit.ingress.helpers import record

TP0, TP1 = TopicPartition("raw", 0), TopicPartition("raw", 1)


class Consumer:
    def __init__(self, batches: list[dict[TopicPartition, list[object]]], shutdown: Shutdown):
        self.batches = batches
        self.shutdown = shutdown
        self.commits: list[dict[TopicPartition, int]] = []
        self.log: list[tuple[str, object]] = []

    def subscribe(self, topics: list[str], listener: object) -> None:
        pass

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    def assignment(self) -> set[TopicPartition]:
        return {TP0, TP1}

    def highwater(self, tp: TopicPartition) -> None:
        return None

    async def getmany(self, timeout_ms: int, max_records: int):
        await asyncio.sleep(0)
        if self.batches:
            return self.batches.pop(0)
        if timeout_ms:
            self.shutdown.trigger()  # everything fetched and a real wait asked: stop
        return {}

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        self.commits.append(dict(offsets))
        self.log.append(("commit", dict(offsets)))


class Batch:
    def __init__(self) -> None:
        self.sources: list[tuple[str, int, int]] = []
        self.closed = False

    def append(self, *, timestamp, key, value, headers):
        topic, part, off = dict(headers)[H_SOURCE].decode().split("/")
        self.sources.append((topic, int(part), int(off)))
        return object()

    def close(self) -> None:
        self.closed = True


class Producer:
    """Acknowledges each batch after a few loop turns; fails for good any batch holding a
    raw offset >= ``fail_from``."""

    def __init__(self, log: list[tuple[str, object]], fail_from: int | None = None) -> None:
        self.log = log
        self.fail_from = fail_from

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def partitions_for(self, topic: str) -> set[int]:
        return {0, 1, 2}

    def create_batch(self) -> Batch:
        return Batch()

    async def send_batch(self, batch: Batch, topic: str, *, partition: int):
        fails = self.fail_from is not None and max(o for *_, o in batch.sources) >= self.fail_from
        self.log.append(("send", list(batch.sources)))
        fut: asyncio.Future[object] = asyncio.get_running_loop().create_future()

        async def ack() -> None:
            for _ in range(5):
                await asyncio.sleep(0)
            if fails:
                fut.set_exception(TopicAuthorizationFailedError())
                return
            self.log.append(("ack", list(batch.sources)))
            fut.set_result(None)

        asyncio.get_running_loop().create_task(ack())
        return fut

    async def send(self, topic, value=None, key=None, headers=None, partition=None):
        fut: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        fut.set_exception(TopicAuthorizationFailedError())
        return fut


def batches(sizes: list[int]) -> list[dict[TopicPartition, list[object]]]:
    out, nxt = [], {TP0: 0, TP1: 0}
    for size in sizes:
        b: dict[TopicPartition, list[object]] = {}
        for tp in (TP0, TP1):
            b[tp] = [
                record(b'{"type":"t"}', topic=tp.topic, partition=tp.partition, offset=o)
                for o in range(nxt[tp], nxt[tp] + size)
            ]
            nxt[tp] += size
        out.append(b)
    return out


class SlowCommitConsumer(Consumer):
    """Each commit takes a few loop turns, logged as it starts and ends; so is each fetch."""

    async def getmany(self, timeout_ms: int, max_records: int):
        got = await super().getmany(timeout_ms, max_records)
        if got:
            self.log.append(("fetch", None))
        return got

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        self.log.append(("commit-start", dict(offsets)))
        for _ in range(20):
            await asyncio.sleep(0)
        await super().commit(offsets)


async def run(
    sizes: list[int],
    fail_from: int | None = None,
    consumer_class: type[Consumer] = Consumer,
    log: list[tuple[str, object]] | None = None,
    commit_interval_ms: int = 500,
) -> tuple[int, Consumer]:
    shutdown = Shutdown()
    consumer = consumer_class(batches(sizes), shutdown)
    if log is not None:
        consumer.log = log
    producer = Producer(consumer.log, fail_from)
    ing = Ingress(
        settings.load_settings(kafka__raw_topic="raw"),
        load_ingress_settings(commit_interval_ms=commit_interval_ms),
        shutdown,
        consumer_factory=lambda: consumer,  # type: ignore[arg-type,return-value]
        producer_factory=lambda: producer,  # type: ignore[arg-type,return-value]
    )
    code = await asyncio.wait_for(ing.run(), 10)
    return code, consumer


def assert_commits_only_acknowledged(consumer: Consumer) -> None:
    acked: set[tuple[int, int]] = set()
    for kind, what in consumer.log:
        if kind == "ack":
            acked.update((p, o) for _, p, o in what)  # type: ignore[attr-defined]
        elif kind == "commit":
            for tp, off in what.items():  # type: ignore[attr-defined]
                assert all((tp.partition, o) in acked for o in range(off)), (tp, off)


async def test_overlapped_batches_commit_only_acknowledged_offsets_in_order() -> None:
    sizes = [3, 4, 2]
    code, consumer = await run(sizes)
    assert code == 0
    assert_commits_only_acknowledged(consumer)
    assert consumer.commits[-1] == {TP0: 9, TP1: 9}  # everything, in the end
    # Batch N+1 is sent only after every record of batch N is acknowledged.
    ends = [sum(sizes[: i + 1]) for i in range(len(sizes))]
    acked: set[tuple[int, int]] = set()
    for kind, what in consumer.log:
        if kind == "ack":
            acked.update((p, o) for _, p, o in what)  # type: ignore[attr-defined]
        elif kind == "send":
            first = min(o for *_, o in what)  # type: ignore[attr-defined]
            k = next(i for i, end in enumerate(ends) if first < end)  # its fetched batch
            before = ends[k - 1] if k else 0
            assert all((p, o) in acked for p in (0, 1) for o in range(before))


async def test_commits_come_at_most_once_per_interval_and_all_at_shutdown() -> None:
    """INGEST_INGRESS_COMMIT_INTERVAL_MS (issue 40): with 0 every acknowledged batch is
    committed, as before; with an interval longer than the run, only the first batch
    (the interval starts then) and, at shutdown, everything acknowledged since."""
    sizes = [3, 4, 2, 5]
    code, each = await run(sizes, commit_interval_ms=0)
    assert code == 0
    assert_commits_only_acknowledged(each)
    assert [c[TP0] for c in each.commits] == [3, 7, 9, 14]
    code, spaced = await run(sizes, commit_interval_ms=60_000)
    assert code == 0
    assert_commits_only_acknowledged(spaced)
    assert [c[TP0] for c in spaced.commits] == [3, 14]


async def test_a_fatal_produce_error_exits_1_and_commits_nothing_of_that_batch() -> None:
    code, consumer = await run([3, 4], fail_from=3)  # the second fetched batch fails
    assert code == 1
    assert_commits_only_acknowledged(consumer)
    assert consumer.commits == [{TP0: 3, TP1: 3}]  # the first batch only


async def test_the_next_batch_is_fetched_while_a_commit_is_in_flight_one_commit_at_a_time() -> None:
    code, consumer = await run([3, 4, 2, 5, 1], consumer_class=SlowCommitConsumer)
    assert code == 0
    assert_commits_only_acknowledged(consumer)
    assert consumer.commits[-1] == {TP0: 15, TP1: 15}
    kinds = [kind for kind, _ in consumer.log]
    open_, overlapped = 0, 0
    for kind in kinds:
        if kind == "commit-start":
            open_ += 1
            assert open_ == 1  # never two commits at once
        elif kind == "commit":
            open_ -= 1
        elif kind == "fetch" and open_:
            overlapped += 1  # a batch fetched (and transformed) during a commit
    assert overlapped >= 1
    offsets = [what[TP0] for kind, what in consumer.log if kind == "commit"]  # type: ignore[index]
    assert offsets == sorted(offsets)  # committed in produce order


async def test_acknowledgements_are_read_while_the_next_batch_is_transformed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log: list[tuple[str, object]] = []

    def logged(msgs: list[ConsumerRecord], **kw: Any) -> list[Outgoing]:
        log.extend(("transform", m.offset) for m in msgs)
        return transform_all(msgs, **kw)

    monkeypatch.setattr(service, "transform_all", logged)
    code, consumer = await run([1000, 1000, 1000], log=log)
    assert code == 0
    assert_commits_only_acknowledged(consumer)
    first_ack = [kind for kind, _ in log].index("ack")
    second = range(1000, 2000)  # the raw offsets of the second fetched batch
    # The first batch's acknowledgement is read in the middle of the second's transform.
    before = [o for kind, o in log[:first_ack] if kind == "transform" and o in second]
    after = [o for kind, o in log[first_ack:] if kind == "transform" and o in second]
    assert before and after
