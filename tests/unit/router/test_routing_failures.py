"""Routing's rule for a per-message failure that a retry cannot fix (issue 34), in pure logic.

The PostgreSQL, Temporal and Kafka sides are fakes here: what is tested is which message
is dead-lettered with which reason and that every offset completes. The same records on
the real stack: tests/integration/router/test_poison.py.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import orjson
from aiokafka.structs import ConsumerRecord

from pipeline.starter import R_START_REJECTED, STARTED, StartRejected
from router.budget import InFlightBytes, record_bytes
from router.routing import R_ROUTE_FAILED, R_RUN_TOO_LARGE, RoutePlanner, Routing
from schemas.flow.spec import RunShape

AID = "7d0c9f7e-2d0b-4a8e-9d1e-6f3c2b1a0d01"


class Catalog:
    def subscribers(self, etype: str) -> list[str]:
        return [AID] if etype == "t" else []

    def flow(self, activity_id: str) -> None:
        return None

    def cancel_rules(self, etype: str) -> list[Any]:
        return []

    def shape(self, activity_id: str) -> RunShape:
        return RunShape(self.tasks, 0)

    tasks = 1


@dataclass
class Producer:
    sent: list[tuple[str, bytes, dict[str, bytes]]] = field(default_factory=list)

    async def send_and_wait(self, topic: str, value: bytes, key: Any = None, headers: Any = ()):
        self.sent.append((topic, value, dict(headers)))


@dataclass
class Starter:
    fail_for: str = ""
    started: list[str] = field(default_factory=list)

    async def start(self, run: Any, **_: Any) -> str:
        await asyncio.sleep(0)
        if self.fail_for and run.event_id == self.fail_for:
            raise asyncpg.exceptions.ProgramLimitExceededError("index row size exceeds")
        self.started.append(run.event_id)
        return STARTED


class Ledger:
    """Refuses any lookup holding a poisoned id, as PostgreSQL refuses a NUL (22021)."""

    def __init__(self, poisoned: str) -> None:
        self.poisoned = poisoned
        self.calls = 0

    async def seen(self, wids: list[str]) -> set[str]:
        self.calls += 1
        if any(self.poisoned in w for w in wids):
            raise asyncpg.exceptions.CharacterNotInRepertoireError("invalid byte sequence")
        return set()


def _msg(offset: int, eid: str, data: object = None) -> ConsumerRecord:
    value = orjson.dumps({"event_id": eid, "type": "t", "data": data or {}})
    return ConsumerRecord("ev", 0, offset, 0, 0, None, value, None, len(value), len(value), [])


def _routing(
    starter: Starter, ledger: Any, done: list[int], catalog: Any = None
) -> tuple[Routing, Producer]:
    producer = Producer()
    routing = Routing(
        planner=RoutePlanner(catalog or Catalog(), 1_000_000),  # type: ignore[arg-type]
        starter=starter,  # type: ignore[arg-type]
        producer=producer,  # type: ignore[arg-type]
        dlq_topic="dlq",
        ledger=ledger,
        concurrency=4,
        on_done=lambda tp, off: done.append(off),
        stopping=lambda: False,
    )
    return routing, producer


async def test_a_start_that_fails_for_good_dead_letters_only_its_message():
    done: list[int] = []
    routing, producer = _routing(Starter(fail_for="bad"), None, done)
    tasks = await routing.submit([_msg(0, "a"), _msg(1, "bad"), _msg(2, "b")])
    await asyncio.gather(*tasks)
    assert sorted(done) == [0, 1, 2], "every offset completes"
    assert [(t, h["dlq_reason"], h["dlq_source_offset"]) for t, _, h in producer.sent] == [
        ("dlq", R_ROUTE_FAILED.encode(), b"1")
    ]
    assert producer.sent[0][2]["dlq_detail"].startswith(b"ProgramLimitExceededError")
    assert routing.starter.started == ["a", "b"]  # type: ignore[attr-defined]


async def test_a_batch_lookup_refused_for_good_is_redone_message_by_message():
    done: list[int] = []
    ledger = Ledger(poisoned="poison")
    routing, producer = _routing(Starter(), ledger, done)
    tasks = await routing.submit([_msg(0, "a"), _msg(1, "poison"), _msg(2, "b")])
    await asyncio.gather(*tasks)
    assert sorted(done) == [0, 1, 2]
    assert ledger.calls == 1 + 3  # the batch, then each message alone
    assert [h["dlq_source_offset"] for _, _, h in producer.sent] == [b"1"]
    assert producer.sent[0][2]["dlq_reason"] == R_ROUTE_FAILED.encode()
    assert routing.starter.started == ["a", "b"]  # type: ignore[attr-defined]


async def test_in_flight_bytes_are_held_until_each_task_ends():
    budget = InFlightBytes(limit=2 * record_bytes(_msg(0, "a")))
    gate = asyncio.Event()

    async def work() -> None:
        await gate.wait()

    tasks = [asyncio.create_task(work()) for _ in range(2)]
    for i, t in enumerate(tasks):
        assert not budget.full
        budget.hold(_msg(i, "a"), t)
    assert budget.full
    tasks[0].cancel()  # a cancelled message (revoke, shutdown) releases its bytes too
    gate.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(0)
    assert budget.used == 0 and not budget.full


async def test_an_event_too_large_for_the_runs_plan_is_dead_lettered_not_started():
    """3 tasks each carrying a 700 KB event: a 2.1 MB plan, which Temporal refuses and the
    run would stay running for ever (measured: tests/integration/flow/test_run_sizes.py)."""
    catalog = Catalog()
    catalog.tasks = 3
    done: list[int] = []
    routing, producer = _routing(Starter(), None, done, catalog)
    big, small = {"blob": "x" * 700_000}, {"blob": "x" * 600_000}
    tasks = await routing.submit([_msg(0, "big", big), _msg(1, "small", small)])
    await asyncio.gather(*tasks)
    assert sorted(done) == [0, 1]
    ((_, _, headers),) = producer.sent
    assert headers["dlq_reason"] == R_RUN_TOO_LARGE.encode()
    assert headers["dlq_source_offset"] == b"0"
    assert b"3 tasks each carry the event" in headers["dlq_detail"]
    assert routing.starter.started == ["small"]  # type: ignore[attr-defined]
    assert routing.stats.unmatched == 0


def test_one_event_id_under_two_window_keys_is_a_race_to_retry_not_a_dead_letter():
    """Found by tests/fuzz: an event id reused with another key value, assigned by two
    window flushes at once, met flow_members_pkey and was dead-lettered route_failed."""
    from router.flow.windows import _retriable

    race = asyncpg.exceptions.UniqueViolationError("duplicate key")
    race.constraint_name = "flow_members_pkey"
    assert _retriable(race)
    other = asyncpg.exceptions.UniqueViolationError("duplicate key")
    other.constraint_name = "flow_windows_pkey"
    assert not _retriable(other)


async def test_a_rejected_start_keeps_its_own_dlq_reason():
    """A start Temporal refuses for good is returned, not raised: its message goes to the
    DLQ as ``start_rejected`` (it went as ``route_failed`` before the gather told the two
    apart)."""

    class Refusing(Starter):
        async def start(self, run: Any, **_: Any) -> str:
            raise StartRejected("namespace is deleted")

    done: list[int] = []
    routing, producer = _routing(Refusing(), None, done)
    await asyncio.gather(*await routing.submit([_msg(0, "a")]))
    assert done == [0]
    assert [h["dlq_reason"] for _, _, h in producer.sent] == [R_START_REJECTED.encode()]
    assert producer.sent[0][2]["dlq_detail"] == b"namespace is deleted"
