"""The DLQ peek reports a partition it cannot decode and still shows the others."""

from __future__ import annotations

from aiokafka import TopicPartition
from aiokafka.errors import UnsupportedCodecError
from aiokafka.structs import ConsumerRecord

from ops.dlq import read_until
from pipeline.kafka import UndecodableBatch

T = "ingest.dlq"
P0, P1 = TopicPartition(T, 0), TopicPartition(T, 1)


def _rec(tp: TopicPartition, offset: int) -> ConsumerRecord:
    return ConsumerRecord(T, tp.partition, offset, 0, 0, None, b"v", None, 1, 1, [])


class FakeConsumer:
    """Partition 1's batch cannot be decoded; partition 0 answers two records."""

    def __init__(self, fail: UndecodableBatch) -> None:
        self.fail = fail

    async def getmany(self, *parts, timeout_ms, max_records=None):
        if P1 in parts:
            raise self.fail
        return {P0: [_rec(P0, 0), _rec(P0, 1)]} if P0 in parts else {}


async def test_undecodable_partition_is_reported_and_the_rest_read():
    fail = UndecodableBatch(P1, 7, UnsupportedCodecError("libraries for zstd not found"))
    got, bad = await read_until(FakeConsumer(fail), {P0, P1}, {P0: 2, P1: 9})
    assert [(m.partition, m.offset) for m in got] == [(0, 0), (0, 1)]
    assert len(bad) == 1
    assert bad[0]["partition"] == 1 and bad[0]["offset"] == 7
    assert "zstd" in bad[0]["cause"] and "partition 1 offset 7" in bad[0]["cause"]


async def test_unknown_partition_stops_reading():
    fail = UndecodableBatch(None, None, UnsupportedCodecError("libraries for lz4 not found"))
    got, bad = await read_until(FakeConsumer(fail), {P0, P1}, {P0: 2, P1: 9})
    assert got == [] and len(bad) == 1 and bad[0]["partition"] is None
