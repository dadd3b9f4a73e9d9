"""Every codec Kafka has is readable here, producers compress as configured, and a batch
that cannot be decoded becomes one error naming where it is."""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka import codec
from aiokafka.errors import KafkaConnectionError, UnsupportedCodecError
from aiokafka.structs import TopicPartition

from pipeline import kafka
from pipeline.settings import KafkaSettings


def test_every_codec_kafka_has_is_installed():
    # gzip is the standard library's; the others need aiokafka's codec extras (cramjam).
    assert codec.has_gzip() and codec.has_snappy() and codec.has_lz4() and codec.has_zstd()


@pytest.mark.parametrize("name", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_the_producer_compresses_as_configured(name, monkeypatch):
    monkeypatch.setattr(kafka, "AIOKafkaProducer", lambda **kw: kw)  # what it is built with
    built: Any = kafka.producer(KafkaSettings(compression_type=name))
    assert built["compression_type"] == (None if name == "none" else name)


class _Records:
    """The shape of aiokafka's PartitionRecords where a batch fails to decode."""

    next_fetch_offset = 41

    def _unpack_records(self) -> Any:
        tp = TopicPartition("ingest.raw", 2)
        assert tp  # a local of the unpacking frame, as in aiokafka's fetcher
        raise UnsupportedCodecError("Libraries for lz4 compression codec not found")
        yield  # a generator, as aiokafka's is


class _Consumer:
    def __init__(self, fail: BaseException | None = None) -> None:
        self.fail = fail

    async def getmany(self, *partitions: Any, timeout_ms: int, max_records: Any) -> Any:
        if self.fail is not None:
            raise self.fail
        return list(_Records()._unpack_records())


async def test_an_undecodable_batch_names_topic_partition_offset_and_cause():
    with pytest.raises(kafka.UndecodableBatch) as info:
        await kafka.getmany(_Consumer(), timeout_ms=0)  # type: ignore[arg-type]
    err = info.value
    assert (err.tp, err.offset) == (TopicPartition("ingest.raw", 2), 41)
    assert isinstance(err.cause, UnsupportedCodecError)
    assert "ingest.raw partition 2 offset 41" in str(err) and "lz4" in str(err)
    assert "\n" not in str(err)


async def test_other_fetch_errors_pass_through_unchanged():
    boom = KafkaConnectionError("broker away")
    with pytest.raises(KafkaConnectionError) as info:
        await kafka.getmany(_Consumer(boom), timeout_ms=0)  # type: ignore[arg-type]
    assert info.value is boom
