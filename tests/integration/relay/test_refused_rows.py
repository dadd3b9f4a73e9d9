"""Rows Kafka refuses for good (issue 34: one record never stops the pipeline).

A row the producer refuses (larger than its ``max_request_size``) or the broker refuses
(larger than the topic's ``max.message.bytes``) is published as a DLQ record instead, in
the same transaction, and the rows after it follow exactly once, in order, as a
``read_committed`` consumer sees them. Each test has its own database, relay instance
and topics, as in ``test_relay.py``.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import asyncpg
import pytest
from prometheus_client import REGISTRY

from pipeline import settings
from pipeline.clients import ensure_topics
from tests.support.outbox import (
    insert_rows,
    outbox_order,
    published,
    read_committed,
    running_relay,
    verdict,
)
from tests.support.stack import Topics
from tests.support.wait import eventually

pytestmark = pytest.mark.integration

SMALL_TOPIC_BYTES = 20_000  # the max.message.bytes of the topics that refuse a row
PRODUCER_MAX_REQUEST = 1_048_576  # the relay producer's max_request_size (aiokafka's)


def _instance() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


async def _put(pool: asyncpg.Pool, rid: str, topic: str, key: bytes, body: bytes) -> None:
    from workers.store import OutboxMessage, put_outbox

    message = OutboxMessage(rid, topic, key, (("task_id", rid.encode()),), body)
    assert await put_outbox(pool, message)


def _dead_lettered(reason: str) -> float:
    value = REGISTRY.get_sample_value(
        "pipeline_dlq_messages_total", {"component": "relay", "reason": reason}
    )
    return value or 0.0


async def _small_topic(cfg: settings.Settings, name: str) -> str:
    await ensure_topics(cfg.kafka, [name], 3, configs={"max.message.bytes": str(SMALL_TOPIC_BYTES)})
    return name


async def _check_published(
    cfg: settings.Settings,
    pool: asyncpg.Pool,
    instance: str,
    topic: str,
    poison: set[str],
    n: int,
) -> None:
    """The ``n`` good rows on ``topic`` exactly once, in the outbox's order per key; the
    mirror past every row (the relay is not stuck behind a refused one)."""
    records = await read_committed(cfg.kafka.bootstrap_servers, topic, n, timeout=120)
    order = {
        k: [i for i in ids if i not in poison] for k, ids in (await outbox_order(pool)).items()
    }
    v = verdict(records, order)
    assert (v.seen, v.missing, v.duplicates, v.unexpected, v.out_of_order_keys) == (
        n,
        0,
        0,
        0,
        0,
    ), v
    total = n + len(poison)
    await eventually(lambda: _mirrored(pool, instance, total), 30, f"{total} rows mirrored")


async def _mirrored(pool: asyncpg.Pool, instance: str, n: int) -> bool:
    return await published(pool, instance) >= n


async def _dlq(cfg: settings.Settings, n: int) -> list[Any]:
    return await read_committed(cfg.kafka.bootstrap_servers, cfg.kafka.dlq_topic, n, timeout=60)


def _headers(msg: Any) -> dict[str, bytes]:
    return {k: bytes(v) for k, v in msg.headers or ()}


async def test_a_row_larger_than_the_topic_allows_goes_to_the_dlq_and_the_rest_follows(
    cfg: settings.Settings, db_pool: asyncpg.Pool, topics: Topics
) -> None:
    """The broker's verdict, known only through the send's future: the transaction is
    aborted, and the next attempt must not meet the same refusal for ever."""
    instance = _instance()
    small = await _small_topic(cfg, f"small-{instance}")
    body = os.urandom(30_000)  # random: no codec shrinks it under the topic's limit
    await insert_rows(db_pool, small, 12)
    await _put(db_pool, "poison-broker", small, b"k3", body)  # mid-batch (batch_size 10)
    await insert_rows(db_pool, small, 12, start=12)
    before = _dead_lettered("outbox_too_large")
    async with running_relay(cfg, instance=instance, batch_size=10):
        await _check_published(cfg, db_pool, instance, small, {"poison-broker"}, 24)
        dead = await _dlq(cfg, 1)
    assert len(dead) == 1, dead
    (m,) = dead
    h = _headers(m)
    assert h["dlq_reason"] == b"outbox_too_large"
    assert h["dlq_component"] == b"relay"
    assert h["dlq_source_topic"] == small.encode()
    assert h["dlq_source_outbox_id"] == b"poison-broker"
    assert h["task_id"] == b"poison-broker"  # the row's own headers are kept
    assert b"MessageSizeTooLargeError" in h["dlq_detail"]
    assert m.key == b"k3" and m.value == body  # the DLQ topic takes it: nothing lost
    assert "dlq_value_omitted" not in h
    assert _dead_lettered("outbox_too_large") - before == 1


async def test_a_row_larger_than_the_producer_allows_goes_to_the_dlq_without_its_value(
    cfg: settings.Settings, db_pool: asyncpg.Pool, topics: Topics
) -> None:
    """The client's verdict (``send`` raises): no Kafka request can carry the body, so
    its DLQ record goes without it; the outbox row keeps it. A row whose topic name
    Kafka can never accept is refused too."""
    instance = _instance()
    await insert_rows(db_pool, topics.out, 8)
    await _put(db_pool, "poison-client", topics.out, b"k1", os.urandom(PRODUCER_MAX_REQUEST + 1))
    await insert_rows(db_pool, topics.out, 8, start=8)
    await _put(db_pool, "poison-topic", "not a topic!", b"k2", b"{}")
    await insert_rows(db_pool, topics.out, 8, start=16)
    before = _dead_lettered("outbox_too_large"), _dead_lettered("outbox_refused")
    async with running_relay(cfg, instance=instance, batch_size=10):
        await _check_published(
            cfg, db_pool, instance, topics.out, {"poison-client", "poison-topic"}, 24
        )
        dead = await _dlq(cfg, 2)
    assert len(dead) == 2, dead
    by_id = {_headers(m)["dlq_source_outbox_id"]: m for m in dead}
    big, bad = by_id[b"poison-client"], by_id[b"poison-topic"]
    hb, ht = _headers(big), _headers(bad)
    assert hb["dlq_reason"] == b"outbox_too_large"
    assert hb["dlq_source_topic"] == topics.out.encode()
    assert hb["dlq_value_omitted"] == b"1" and big.value is None and big.key == b"k1"
    assert ht["dlq_reason"] == b"outbox_refused"
    assert ht["dlq_source_topic"] == b"not a topic!"
    assert b"InvalidTopicError" in ht["dlq_detail"]
    assert bad.value == b"{}" and bad.key == b"k2"
    after = _dead_lettered("outbox_too_large"), _dead_lettered("outbox_refused")
    assert (after[0] - before[0], after[1] - before[1]) == (1, 1)


async def test_when_the_dlq_refuses_the_value_too_the_record_goes_without_it(
    cfg: settings.Settings, db_pool: asyncpg.Pool, topics: Topics
) -> None:
    """Both topics refuse the body, each only through the broker's verdict: the row is
    sent alone, then as its DLQ record, then as its DLQ record without the value."""
    instance = _instance()
    small = await _small_topic(cfg, f"small-{instance}")
    dlq = await _small_topic(cfg, f"dlq-small-{instance}")
    cfg = cfg.model_copy(update={"kafka": cfg.kafka.model_copy(update={"dlq_topic": dlq})})
    await insert_rows(db_pool, small, 5)
    await _put(db_pool, "poison-both", small, b"k0", os.urandom(30_000))
    await insert_rows(db_pool, small, 5, start=5)
    async with running_relay(cfg, instance=instance, batch_size=20):
        await _check_published(cfg, db_pool, instance, small, {"poison-both"}, 10)
        dead = await _dlq(cfg, 1)
    assert len(dead) == 1, dead
    h = _headers(dead[0])
    assert (h["dlq_reason"], h["dlq_source_outbox_id"]) == (b"outbox_too_large", b"poison-both")
    assert h["dlq_value_omitted"] == b"1" and dead[0].value is None
