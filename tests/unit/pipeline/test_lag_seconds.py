"""pipeline.lag: consumer lag in seconds, on a fake clock and a private registry.

The gauge is the age of the record at the committed offset (0 when caught up), read
from the first timestamp of each fetched batch; for a backlog not fetched yet, the time
since it was first seen (a lower bound). Its value is computed when scraped.
"""

from __future__ import annotations

from typing import NamedTuple

from aiokafka.structs import TopicPartition
from prometheus_client import REGISTRY, CollectorRegistry, Gauge

from ingress.service import Ingress
from ingress.settings import load_ingress_settings
from pipeline import metrics, settings
from pipeline.lag import LagSeconds
from pipeline.runtime import Shutdown
from router.service import Router
from router.settings import load_router_settings

TP = TopicPartition("events", 0)
TP1 = TopicPartition("events", 1)
T0 = 1_700_000_000.0  # the fake clock's start, seconds since the epoch


class Rec(NamedTuple):
    offset: int
    timestamp: int  # ms


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def recs(first: int, n: int, ts_s: float, step_s: float = 1.0) -> list[Rec]:
    """``n`` records from offset ``first``, produced at ``ts_s``, ``ts_s + step_s``, ..."""
    return [Rec(first + i, int((ts_s + i * step_s) * 1000)) for i in range(n)]


def setup() -> tuple[LagSeconds, Clock, CollectorRegistry]:
    registry = CollectorRegistry()
    gauge = Gauge("lag_seconds", "test", ["component", "topic", "partition"], registry=registry)
    clock = Clock()
    return LagSeconds(gauge, "router", clock), clock, registry


def scraped(registry: CollectorRegistry, tp: TopicPartition = TP) -> float | None:
    labels = {"component": "router", "topic": tp.topic, "partition": str(tp.partition)}
    return registry.get_sample_value("lag_seconds", labels)


def test_no_series_until_the_first_refresh() -> None:
    lag, _, registry = setup()
    lag.fetched({TP: recs(0, 3, T0 - 10)})
    assert scraped(registry) is None  # a missing series is not a 0
    lag.refresh(TP, 0, 3)
    assert scraped(registry) == 10


def test_age_of_the_committed_record_grows_at_scrape_time() -> None:
    lag, clock, registry = setup()
    lag.fetched({TP: recs(0, 5, T0 - 30)})
    lag.refresh(TP, 0, 5)
    assert scraped(registry) == 30
    clock.now += 12  # no refresh: a stuck process still reports a growing age
    assert scraped(registry) == 42


def test_commits_advance_to_the_batch_holding_the_committed_offset() -> None:
    lag, _, registry = setup()
    lag.fetched({TP: recs(0, 5, T0 - 100)})  # offsets 0-4, produced at -100 .. -96
    lag.fetched({TP: recs(5, 5, T0 - 50)})  # offsets 5-9, produced at -50 .. -46
    lag.refresh(TP, 0, 10)
    assert scraped(registry) == 100
    lag.committed({TP: 3})  # mid-batch: the batch's first timestamp, never less than true
    assert scraped(registry) == 100
    lag.committed({TP: 5})  # the first batch is done: the second's first record
    assert scraped(registry) == 50
    lag.committed({TP: 10})  # everything fetched is committed
    assert scraped(registry) == 0
    lag.refresh(TP, 10, 10)
    assert scraped(registry) == 0


def test_refresh_prunes_what_was_committed_without_a_commit_call() -> None:
    lag, _, registry = setup()
    lag.fetched({TP: recs(0, 2, T0 - 20)})
    lag.fetched({TP: recs(2, 2, T0 - 5)})
    lag.refresh(TP, 2, 4)
    assert scraped(registry) == 5


def test_a_group_that_never_committed_counts_everything_fetched() -> None:
    """Ingress of a new group: no committed offset; its position is past what it fetched,
    which is not committed for all that."""
    lag, clock, registry = setup()
    lag.fetched({TP: recs(0, 4, T0 - 70)})
    lag.refresh(TP, None, 4, 4)  # position = high watermark, nothing committed
    assert scraped(registry) == 70
    lag.committed({TP: 4})
    lag.refresh(TP, 4, 4)
    assert scraped(registry) == 0
    # Another partition, never committed and nothing fetched: behind iff position < high.
    lag.refresh(TP1, None, 9, 0)
    clock.now += 2
    assert scraped(registry, TP1) == 2
    lag.refresh(TP1, None, 9, 9)
    assert scraped(registry, TP1) == 0


def test_caught_up_is_zero() -> None:
    lag, clock, registry = setup()
    lag.refresh(TP, 7, 7)
    clock.now += 100
    assert scraped(registry) == 0


def test_backlog_not_fetched_is_a_lower_bound_from_when_it_was_seen() -> None:
    lag, clock, registry = setup()
    lag.refresh(TP, 0, 50)  # behind, nothing fetched (paused, or before the first fetch)
    assert scraped(registry) == 0
    clock.now += 8
    lag.refresh(TP, 0, 60)  # still behind: the first sighting stays the reference
    assert scraped(registry) == 8
    # The first fetch shows the record's real timestamp: the value becomes exact.
    lag.fetched({TP: recs(0, 10, T0 - 300)})
    assert scraped(registry) == 308
    # Caught up, then behind again with nothing fetched: a new sighting.
    lag.refresh(TP, 60, 60)
    assert scraped(registry) == 0
    lag.refresh(TP, 60, 61)
    clock.now += 3
    assert scraped(registry) == 3


def test_records_fetched_again_after_a_seek_add_nothing() -> None:
    lag, _, registry = setup()
    lag.fetched({TP: recs(0, 5, T0 - 40)})
    lag.fetched({TP: recs(2, 3, T0 - 1)})  # 2-4 again (a seek back)
    lag.refresh(TP, 0, 5)
    assert scraped(registry) == 40
    lag.committed({TP: 5})
    assert scraped(registry) == 0
    lag.fetched({TP: recs(3, 4, T0 - 2)})  # 3-6: reaches past what was seen, appended
    assert scraped(registry) == 2


def test_partitions_are_independent_and_empty_lists_ignored() -> None:
    lag, _, registry = setup()
    lag.fetched({TP: recs(0, 1, T0 - 9), TP1: []})
    lag.refresh(TP, 0, 1)
    lag.refresh(TP1, 4, 4)
    assert (scraped(registry, TP), scraped(registry, TP1)) == (9, 0)


def test_a_record_without_timestamp_counts_from_its_fetch() -> None:
    lag, clock, registry = setup()
    lag.fetched({TP: [Rec(0, -1)]})
    lag.refresh(TP, 0, 1)
    clock.now += 4
    assert scraped(registry) == 4


def test_forget_removes_the_series_and_resets_the_partition() -> None:
    lag, _, registry = setup()
    lag.fetched({TP: recs(0, 3, T0 - 60)})
    lag.refresh(TP, 0, 3)
    lag.refresh(TP1, 0, 0)
    lag.forget({TP, TopicPartition("events", 9)})  # a partition never seen: no error
    assert scraped(registry) is None and lag.value(TP) is None
    assert scraped(registry, TP1) == 0
    lag.refresh(TP, 100, 100)  # assigned again: nothing of the old assignment is left
    assert scraped(registry) == 0


def test_a_clock_behind_the_record_timestamps_reads_zero_not_negative() -> None:
    lag, _, registry = setup()
    lag.fetched({TP: recs(0, 1, T0 + 30)})  # a producer whose clock is ahead
    lag.refresh(TP, 0, 1)
    assert scraped(registry) == 0


async def test_ingress_revoke_removes_both_lag_series() -> None:
    """Ingress removes pipeline_consumer_lag_seconds where it removes pipeline_consumer_lag."""
    ing = Ingress(
        settings.load_settings(kafka__raw_topic="raw"), load_ingress_settings(), Shutdown()
    )
    tp = TopicPartition("raw-lag-unit", 0)
    labels = {"component": "ingress", "topic": tp.topic, "partition": "0"}
    metrics.CONSUMER_LAG.labels("ingress", tp.topic, "0").set(3)
    ing._lag_seconds.refresh(tp, 0, 3)
    assert REGISTRY.get_sample_value("pipeline_consumer_lag_seconds", labels) is not None
    await ing.on_revoked({tp})
    assert REGISTRY.get_sample_value("pipeline_consumer_lag", labels) is None
    assert REGISTRY.get_sample_value("pipeline_consumer_lag_seconds", labels) is None


async def test_router_revoke_removes_both_lag_series() -> None:
    """The router too (its revoke's commit fails without a consumer; the removal still runs)."""
    router = Router(
        settings.load_settings(),
        load_router_settings(),
        client=None,  # type: ignore[arg-type]
        pool=None,  # type: ignore[arg-type]
        shutdown=Shutdown(),
    )
    tp = TopicPartition("events-lag-unit", 2)
    labels = {"component": "router", "topic": tp.topic, "partition": "2"}
    metrics.CONSUMER_LAG.labels("router", tp.topic, "2").set(1)
    router.lag_seconds.fetched({tp: recs(0, 1, T0)})
    router.lag_seconds.refresh(tp, 0, 1)
    assert REGISTRY.get_sample_value("pipeline_consumer_lag_seconds", labels) is not None
    await router.on_revoked({tp})
    assert REGISTRY.get_sample_value("pipeline_consumer_lag", labels) is None
    assert REGISTRY.get_sample_value("pipeline_consumer_lag_seconds", labels) is None
