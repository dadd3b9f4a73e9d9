"""One key, one partition, in every producer this project builds."""

import zlib

from pipeline.kafka import _partitioner, key_partition


def test_key_partition_is_crc32_mod_n():
    assert key_partition(b"evt-1", 6) == zlib.crc32(b"evt-1") % 6


def test_client_partitioner_agrees_with_explicit_partitions():
    for i in range(200):
        key = f"event-{i}".encode()
        # aiokafka may hand the partitions in any order; the answer must not depend on it
        assert _partitioner(key, [2, 0, 1], [0, 1, 2]) == key_partition(key, 3)
        assert _partitioner(key, [0, 1, 2], []) == key_partition(key, 3)


def test_unkeyed_messages_go_to_an_available_partition():
    assert _partitioner(None, [0, 1, 2], [1]) == 1
