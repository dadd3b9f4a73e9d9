"""flow_decide (migrations 0008, 0018) on real PostgreSQL with a fake clock: the GCRA math of
throttle and rate_limit, the recorded decision a redelivery gets back, singleton holders."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

T0 = datetime(2026, 1, 1, tzinfo=UTC)


async def decide(
    pool,
    wid: str,
    aid: uuid.UUID,
    at: float,
    *,
    throttle: tuple[float, float] | None = None,
    rate: tuple[float, float] | None = None,
    singleton: str | None = None,
    checked: tuple[str, bool] | None = None,
    key: str = "",
):
    return await pool.fetchrow(
        # NULL: p_cx_key (cancel_on's match keys, migration 0018).
        "SELECT * FROM flow_decide($1, $2, 'e', $3, $4, $5, $6, $7, $8, $9, $10, $11, $12,"
        " NULL, $13)",
        wid,
        aid,
        key if rate else None,
        rate[0] if rate else None,
        rate[1] if rate else None,
        key if throttle else None,
        throttle[0] if throttle else None,
        throttle[1] if throttle else None,
        key if singleton else None,
        singleton,
        checked[0] if checked else None,
        checked[1] if checked else None,
        T0 + timedelta(seconds=at),
    )


def offset(ts: datetime) -> float:
    return round((ts - T0).total_seconds(), 6)


async def test_throttle_spreads_a_burst_one_interval_apart(db_pool):
    aid = uuid.uuid4()
    # limit 5 per 2 s, burst 1: T = 0.4 s, tau = 0.
    starts = [
        offset((await decide(db_pool, f"w{i}", aid, 0.0, throttle=(0.4, 0.0)))["start_at"])
        for i in range(10)
    ]
    assert starts == pytest.approx([0.4 * i for i in range(10)])
    # After an idle spell longer than the backlog, a start goes at once again.
    late = await decide(db_pool, "late", aid, 30.0, throttle=(0.4, 0.0))
    assert offset(late["start_at"]) == pytest.approx(30.0)


async def test_throttle_burst_lets_burst_starts_go_at_once(db_pool):
    aid = uuid.uuid4()
    # limit 5 per 2 s, burst 3: tau = 2 T.
    starts = [
        offset((await decide(db_pool, f"b{i}", aid, 0.0, throttle=(0.4, 0.8)))["start_at"])
        for i in range(6)
    ]
    assert starts == pytest.approx([0.0, 0.0, 0.0, 0.4, 0.8, 1.2])


async def test_keys_are_separate_buckets(db_pool):
    aid = uuid.uuid4()
    a = [await decide(db_pool, f"a{i}", aid, 0.0, throttle=(1.0, 0.0), key="a") for i in range(2)]
    b = await decide(db_pool, "b0", aid, 0.0, throttle=(1.0, 0.0), key="b")
    assert [offset(r["start_at"]) for r in a] == [0.0, 1.0]
    assert offset(b["start_at"]) == 0.0


async def test_rate_limit_passes_limit_at_once_then_one_per_interval(db_pool):
    aid = uuid.uuid4()
    # limit 5 per 10 s: T = 2 s, tau = 8 s.
    burst = [await decide(db_pool, f"r{i}", aid, 0.0, rate=(2.0, 8.0)) for i in range(7)]
    assert [r["outcome"] for r in burst] == ["start"] * 5 + ["skip"] * 2
    assert {r["reason"] for r in burst[5:]} == {"rate_limit"}
    # A skip takes no slot: 2 s later exactly one more passes.
    later = [await decide(db_pool, f"s{i}", aid, 2.0, rate=(2.0, 8.0)) for i in range(2)]
    assert [r["outcome"] for r in later] == ["start", "skip"]


async def test_a_redelivered_workflow_id_gets_its_decision_back_and_takes_no_slot(db_pool):
    aid = uuid.uuid4()
    first = [await decide(db_pool, f"d{i}", aid, 0.0, throttle=(0.4, 0.0)) for i in range(5)]
    tat = await db_pool.fetchval("SELECT tat FROM flow_gcra WHERE activity_id = $1", aid)
    again = [await decide(db_pool, f"d{i}", aid, 1.0, throttle=(0.4, 0.0)) for i in range(5)]
    assert [r["start_at"] for r in again] == [r["start_at"] for r in first]
    assert all(r["fresh"] for r in first) and not any(r["fresh"] for r in again)
    assert await db_pool.fetchval("SELECT tat FROM flow_gcra WHERE activity_id = $1", aid) == tat
    # A skip stays a skip, even once the limit would let it through.
    rl = [await decide(db_pool, f"k{i}", aid, 0.0, rate=(10.0, 0.0)) for i in range(2)]
    assert [r["outcome"] for r in rl] == ["start", "skip"]
    replayed = await decide(db_pool, "k1", aid, 100.0, rate=(10.0, 0.0))
    assert (replayed["outcome"], replayed["reason"], replayed["fresh"]) == (
        "skip",
        "rate_limit",
        False,
    )


async def test_singleton_asks_about_the_holder_and_records_nothing_until_answered(db_pool):
    aid = uuid.uuid4()
    assert (await decide(db_pool, "h1", aid, 0.0, singleton="skip"))["outcome"] == "start"
    check = await decide(db_pool, "h2", aid, 1.0, singleton="skip")
    assert (check["outcome"], check["holder"]) == ("check", "h1")
    assert (
        await db_pool.fetchval("SELECT count(*) FROM flow_decisions WHERE workflow_id = 'h2'") == 0
    )
    skip = await decide(db_pool, "h2", aid, 1.0, singleton="skip", checked=("h1", True))
    assert (skip["outcome"], skip["reason"]) == ("skip", "singleton")
    # The holder ended without freeing the key (a crash): the next trigger takes it over.
    take = await decide(db_pool, "h3", aid, 2.0, singleton="skip", checked=("h1", False))
    assert take["outcome"] == "start" and take["cancelled"] is None
    assert (
        await db_pool.fetchval("SELECT workflow_id FROM flow_singleton WHERE activity_id = $1", aid)
        == "h3"
    )
    # cancel: the running holder is named to be cancelled, and the key passes on.
    cancel = await decide(db_pool, "h4", aid, 3.0, singleton="cancel", checked=("h3", True))
    assert (cancel["outcome"], cancel["cancelled"]) == ("start", "h3")
    assert (
        await db_pool.fetchval("SELECT workflow_id FROM flow_singleton WHERE activity_id = $1", aid)
        == "h4"
    )
