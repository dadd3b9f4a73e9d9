"""The DLQ peek reports a partition it cannot decode and still shows the others."""

from __future__ import annotations

from aiokafka import TopicPartition
from aiokafka.errors import UnsupportedCodecError

from ops.dlq import read_newest
from pipeline.kafka import UndecodableBatch
from tests.unit.ops.fake_log import FakeLog

T = "ingest.dlq"
P0, P1 = TopicPartition(T, 0), TopicPartition(T, 1)
BIG = 1 << 30


async def test_undecodable_partition_is_reported_and_the_rest_read():
    fail = UndecodableBatch(P1, 7, UnsupportedCodecError("libraries for zstd not found"))
    log = FakeLog({P0: [b"v", b"v"], P1: [b"v"] * 9}, fail={P1: fail})
    read = await read_newest(log, [P0, P1], log.begin, log.end, 10, BIG)
    assert sorted((m["partition"], m["offset"]) for m in read.messages) == [(0, 0), (0, 1)]
    assert len(read.undecodable) == 1
    bad = read.undecodable[0]
    assert bad["partition"] == 1 and bad["offset"] == 7
    assert "zstd" in bad["cause"] and "partition 1 offset 7" in bad["cause"]
    assert read.not_read == 0  # an undecodable partition is reported, not counted unread


async def test_unknown_partition_stops_reading():
    fail = UndecodableBatch(None, None, UnsupportedCodecError("libraries for lz4 not found"))
    log = FakeLog({P0: [b"v", b"v"], P1: [b"v"] * 9}, fail={P0: fail, P1: fail})
    read = await read_newest(log, [P0, P1], log.begin, log.end, 10, BIG)
    assert read.messages == [] and len(read.undecodable) == 1
    assert read.undecodable[0]["partition"] is None
