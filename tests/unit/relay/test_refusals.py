"""Rows Kafka refuses for good (relay/refusals.py): the stages a refused row goes through,
its DLQ record, and the relay's transactions against a producer that refuses like Kafka.

The real thing, on the stack: tests/integration/relay/test_refused_rows.py.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from aiokafka.errors import (
    InvalidTopicError,
    KafkaConnectionError,
    MessageSizeTooLargeError,
    OutOfOrderSequenceNumber,
    TopicAuthorizationFailedError,
)

from pipeline import settings
from pipeline.runtime import Shutdown
from relay import refusals
from relay.outbox import Position, Row
from relay.refusals import Refusals, Stage, Unpublishable
from relay.settings import RelaySettings

DLQ = "dlq"


def _row(i: int, body: bytes = b"{}", topic: str = "out", key: bytes | None = b"k") -> Row:
    rid = f"row-{i}"
    return Row(
        rid, Position(7, i), topic, key, [("task_id", rid.encode())], body, datetime.now(UTC)
    )


def _h(headers: list[tuple[str, bytes]]) -> dict[str, bytes]:
    return dict(headers)


def test_what_is_a_refusal_for_good() -> None:
    assert refusals.reason_for(MessageSizeTooLargeError()) == "outbox_too_large"
    assert refusals.reason_for(InvalidTopicError()) == "outbox_refused"
    # Retried (a term ends and the next tries again), never dead-lettered:
    for exc in (
        KafkaConnectionError(),
        OutOfOrderSequenceNumber(),
        TopicAuthorizationFailedError(),
    ):
        assert refusals.reason_for(exc) is None, exc


def test_topic_names_kafka_can_never_accept() -> None:
    for good in ("out", "a.b_c-D9", "x" * 249):
        assert refusals.topic_error(good) is None
    for bad in ("", ".", "..", "not a topic!", "x" * 250, "é"):
        assert isinstance(refusals.topic_error(bad), InvalidTopicError), bad


def test_the_broker_refusing_a_batch_makes_suspects_then_each_alone_gets_its_verdict() -> None:
    v, row = Refusals(), _row(1)
    exc = MessageSizeTooLargeError()
    assert v.refused(row, exc, alone=False).stage == Stage.ALONE  # maybe a neighbour
    nxt = v.refused(row, exc, alone=True)  # refused alone: its own size
    assert (nxt.stage, nxt.reason) == (Stage.DLQ, "outbox_too_large")
    assert "MessageSizeTooLargeError" in nxt.detail
    assert v.refused(row, exc, alone=True).stage == Stage.DLQ_NO_VALUE
    assert v.refused(row, exc, alone=True).stage == Stage.DLQ_BARE
    assert v.get(row).reason == "outbox_too_large"  # the row's reason, not the DLQ's
    with pytest.raises(Unpublishable, match="row-1"):
        v.refused(row, exc, alone=True)


def test_the_clients_verdict_is_the_rows_own_and_memory_ends_at_the_commit() -> None:
    v, a, b = Refusals(), _row(1), _row(2)
    assert v.refused(a, MessageSizeTooLargeError(), alone=True).stage == Stage.DLQ
    v.refused(b, MessageSizeTooLargeError(), alone=False)
    v.forget_through(a.position)
    assert (v.stage(a), v.stage(b), len(v)) == (Stage.BATCHED, Stage.ALONE, 1)


def test_each_stage_sends_less_of_the_row() -> None:
    row = _row(3, body=b"big", key=b"k3")
    first = refusals.Refused(Stage.DLQ, "outbox_too_large", "MessageSizeTooLargeError: x")
    assert refusals.record(row, refusals.Refused(Stage.ALONE), DLQ) == refusals.Record(
        "out", b"k3", b"big", row.headers
    )
    full = refusals.record(row, first, DLQ)
    h = _h(full.headers)
    assert (full.topic, full.key, full.value) == (DLQ, b"k3", b"big")
    assert h["dlq_reason"] == b"outbox_too_large" and h["dlq_component"] == b"relay"
    assert h["dlq_source_topic"] == b"out" and h["dlq_source_outbox_id"] == b"row-3"
    assert h["task_id"] == b"row-3" and h["dlq_attempt"] == b"1"
    assert "dlq_source_partition" not in h  # it never had one
    no_value = refusals.record(
        row, refusals.Refused(Stage.DLQ_NO_VALUE, first.reason, first.detail), DLQ
    )
    assert no_value.value is None and no_value.key == b"k3"
    assert _h(no_value.headers)["dlq_value_omitted"] == b"1" and "task_id" in _h(no_value.headers)
    bare = refusals.record(row, refusals.Refused(Stage.DLQ_BARE, first.reason, first.detail), DLQ)
    hb = _h(bare.headers)
    assert (bare.key, bare.value) == (b"row-3", None) and "task_id" not in hb
    assert hb["dlq_value_omitted"] == hb["dlq_headers_omitted"] == b"1"
    assert hb["dlq_source_outbox_id"] == b"row-3"
    # Without a key, the outbox id stands in (a Kafka record needs a key or a value).
    keyless = _row(4, key=None)
    r = refusals.record(keyless, refusals.Refused(Stage.DLQ_NO_VALUE, "r", "d"), DLQ)
    assert (r.key, r.value) == (b"row-4", None)


# --- the relay's transactions against a producer that refuses like Kafka -------------


class FakeProducer:
    """Refuses like Kafka: ``send`` raises for a record over ``max_request``; the broker
    refuses a whole batch (the records queued to one topic between two yields) over the
    topic's ``limits``. Records of committed transactions land in ``committed``."""

    def __init__(self, max_request: int = 1000, limits: dict[str, int] | None = None) -> None:
        self.max_request, self.limits = max_request, limits or {}
        self.open: dict[str, list[tuple[asyncio.Future[Any], tuple[Any, ...]]]] = {}
        self.txn: list[tuple[Any, ...]] = []
        self.committed: list[tuple[Any, ...]] = []
        self.aborts = self.commits = 0

    async def send(self, topic: str, value: bytes | None, key: Any = None, headers: Any = ()):  # type: ignore[no-untyped-def]
        if len(value or b"") > self.max_request:
            raise MessageSizeTooLargeError("client")
        fut = asyncio.get_running_loop().create_future()
        if not self.open:
            asyncio.get_running_loop().call_soon(self._drain)
        self.open.setdefault(topic, []).append((fut, (topic, key, value, dict(headers))))
        return fut

    def _drain(self) -> None:
        batches, self.open = self.open, {}
        for topic, batch in batches.items():
            size = sum(len(r[1] or b"") + len(r[2] or b"") for _, r in batch)
            refused = size > self.limits.get(topic, 10**9)
            for fut, rec in batch:
                if refused:
                    fut.set_exception(MessageSizeTooLargeError("broker"))
                else:
                    self.txn.append(rec)
                    fut.set_result(None)

    async def commit_transaction(self) -> None:
        self.committed += self.txn
        self.txn, self.commits = [], self.commits + 1

    async def abort_transaction(self) -> None:
        self.txn, self.aborts = [], self.aborts + 1


def _relay():  # type: ignore[no-untyped-def]
    from relay.service import Relay

    cfg = settings.load_settings(kafka__dlq_topic=DLQ)
    return Relay(cfg, RelaySettings(instance="unit", progress_topic="progress"), Shutdown())


async def _attempts(relay: Any, producer: FakeProducer, rows: list[Row]) -> list[Row]:
    """Publish ``rows`` as the relay's terms do: attempt after attempt until one commits."""
    for _ in range(10):
        try:
            return list(await relay._publish(producer, rows))
        except MessageSizeTooLargeError:
            continue
    raise AssertionError("the relay loops on a refused row")


def _topics(producer: FakeProducer) -> list[tuple[str, Any]]:
    return [(r[0], r[3].get("task_id")) for r in producer.committed if r[0] != "progress"]


async def test_a_row_the_broker_refuses_costs_two_aborts_then_goes_to_the_dlq() -> None:
    relay, producer = _relay(), FakeProducer(limits={"out": 50})
    rows = [_row(0, b"a" * 10), _row(1, b"p" * 60), _row(2, b"b" * 10)]
    dead = await _attempts(relay, producer, rows)
    assert [r.id for r in dead] == ["row-1"]
    # 1: the batch of three refused (all suspects); 2: row-1 alone refused; 3: commit.
    assert (producer.aborts, producer.commits) == (2, 1)
    assert _topics(producer) == [("out", b"row-0"), (DLQ, b"row-1"), ("out", b"row-2")]
    dlq = producer.committed[1]
    assert dlq[2] == b"p" * 60 and dlq[3]["dlq_reason"] == b"outbox_too_large"
    assert producer.committed[-1][0] == "progress"  # in the same transaction
    relay._dead_lettered(dead)
    relay.verdicts.forget_through(rows[-1].position)
    assert len(relay.verdicts) == 0


async def test_a_row_the_client_refuses_goes_to_the_dlq_in_the_same_transaction() -> None:
    relay, producer = _relay(), FakeProducer(max_request=100)
    rows = [_row(0), _row(1, b"x" * 101), _row(2, topic="no such topic"), _row(3)]
    dead = await _attempts(relay, producer, rows)
    assert [r.id for r in dead] == ["row-1", "row-2"]
    assert (producer.aborts, producer.commits) == (0, 1)
    assert _topics(producer) == [
        ("out", b"row-0"),
        (DLQ, b"row-1"),  # without its value: the client refuses it with it too
        (DLQ, b"row-2"),
        ("out", b"row-3"),
    ]
    big = next(r for r in producer.committed if r[3].get("dlq_source_outbox_id") == b"row-1")
    assert big[2] is None and big[3]["dlq_value_omitted"] == b"1"
    bad = next(r for r in producer.committed if r[3].get("dlq_source_outbox_id") == b"row-2")
    assert bad[3]["dlq_reason"] == b"outbox_refused" and bad[2] == b"{}"


async def test_when_the_dlq_refuses_even_the_bare_record_the_term_ends() -> None:
    relay, producer = _relay(), FakeProducer(max_request=100, limits={DLQ: 0})
    with pytest.raises(Unpublishable):
        await _attempts(relay, producer, [_row(0, b"x" * 101)])
