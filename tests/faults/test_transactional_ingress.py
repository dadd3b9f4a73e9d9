"""Scenarios 17-18: transactional ingress is exactly once under Kafka's own standard (issue 24).

The idea of Kafka's transactions system test (``tests/kafkatest/tests/core/
transactions_test.py`` in apache/kafka), with ingress as the transactional copier, on the
private 3-broker KRaft cluster (replication factor 3, ``min.insync.replicas`` 2, unclean
election off): a paced stream of raw events (one in 25 malformed: it must end in the DLQ,
inside the same transaction) goes through ``ingest ingress`` with
``INGEST_INGRESS_TRANSACTIONAL=true``, while

1. ingress is SIGKILLed 3 times, each after at least another 20 % of the events came out
   (and restarted at once; the test-only delay before each commit keeps transactions open,
   so the kills land inside them);
2. then the broker leading most partitions of the events topic is SIGKILLed, and restarted
   10 s later;
3. then every broker is restarted in turn (SIGTERM, start, back in sync).

A ``read_committed`` consumer follows the events topic and the DLQ throughout, and a fresh
one reads them again at the end, and so does Kafka's own Java consumer: each must see every
raw message exactly once (input set = output set, 0 duplicates; with one partition, in raw
order). A ``read_uncommitted`` reader counts what aborted transactions left on the log
(``aborted_copies``): a kill that landed mid-transaction shows up there, never in the
committed view.

18 is the control: the same kills with ingress in its plain (at-least-once) mode. The same
check must then see duplicates, the Java reader as many as the aiokafka one; if it did
not, the check could not fail.

Reduced size (``make test``): one partition per topic (order checked), 1,500 events. Full
size (``FAULTS_SCALE=full``, ``make faults``): 20,000 events, once with one partition and
once with 6.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from devstack.kafka_cluster import KafkaCluster
from devstack.kafka_inspect import leaders

from pipeline.clients import topic_configs
from tests.faults import harness as h
from tests.faults.cluster import NODES, all_in_sync
from tests.faults.exactly_once import (
    OpenTransactions,
    Reader,
    read_everything,
    read_everything_java,
)
from tests.faults.failover import BAD_PREFIX, Stream, produce_until
from tests.support import kafka
from tests.support.stack import Topics
from tests.support.wait import eventually, wait_until

EVENTS = h.scaled(1500, 20_000)
RATE = h.scaled(40, 200)  # raw events per second while the faults go on
KILLS = 3
DOWN = h.scaled(5, 10)  # seconds the SIGKILLed leader stays down
COMMIT_DELAY = "0.3"  # seconds each transaction stays open after its records are sent
# Full size is marked slow: `make test` runs the reduced one, `make faults` the full ones.
SIZES = h.scaled(
    [pytest.param(1, id="1-partition")],
    [pytest.param(n, id=f"{n}-partitions", marks=pytest.mark.slow) for n in (1, 6)],
)


async def _topics(cluster: KafkaCluster, partitions: int) -> Topics:
    await all_in_sync(cluster)
    tag = uuid.uuid4().hex[:10]
    t = Topics(raw=f"raw-{tag}", events=f"events-{tag}", dlq=f"dlq-{tag}", out=f"out-{tag}")
    admin = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    await admin.start()
    try:
        resp = await admin.create_topics(
            [NewTopic(name, partitions, NODES, topic_configs=topic_configs(NODES))
             for name in (t.raw, t.events, t.dlq)]
        )  # fmt: skip
        assert [code for _, code, *_ in resp.topic_errors] == [0, 0, 0], resp
    finally:
        await admin.close()
    return t


class Run:
    """One scenario: the stream, ingress, the readers and the figures row."""

    def __init__(self, cluster: KafkaCluster, topics: Topics, pipe: h.Pipeline, row: h.Figures):
        self.cluster, self.topics, self.pipe, self.row = cluster, topics, pipe, row
        self.stream = Stream()
        self.done = asyncio.Event()
        self.live = Reader(cluster.bootstrap, topics.events, topics.dlq, "read_committed")
        self.ingress: h.Child | None = None
        self.transactional = False
        self.open_txns = OpenTransactions(cluster.bootstrap, topics.events)

    async def out(self) -> int:
        """Records the live read_committed reader has seen (events and DLQ)."""
        return self.live.seen.total

    async def progressed(self, share: float) -> None:
        """Until the committed output holds ``share`` of the events, with ingress alive."""
        want = int(share * EVENTS)

        async def enough() -> bool:
            assert self.ingress is not None
            self.ingress.assert_alive()
            return self.live.seen.total >= want

        await eventually(enough, h.scaled(120, 600), f"{want} events out")

    async def in_flight(self) -> bool:
        """Whether ingress has records on the log that its commit does not cover yet.

        Transactional: an events partition's high watermark is past its last stable offset
        (a transaction is open). Plain: more events and DLQ records than committed raw offsets.
        """
        b, t = self.cluster.bootstrap, self.topics
        if self.transactional:
            return await self.open_txns.open()
        out = await kafka.count(b, t.events) + await kafka.count(b, t.dlq)
        done = await kafka.committed(b, self.pipe.ingress_group, t.raw)
        return out > sum(off or 0 for off in done.values())

    async def kill_ingress(self) -> bool:
        """SIGKILL ingress while it has records in flight (or after 5 s without), restart it;
        whether the kill landed in flight."""
        assert self.ingress is not None
        landed = await wait_until(self.in_flight, 5, interval=0.05)
        await self.ingress.kill()
        self.ingress = await self.pipe.restart(self.ingress)
        return landed


async def _leader_kill(run: Run) -> str:
    led = Counter((await leaders(run.cluster.bootstrap, run.topics.events)).values())
    node, count = led.most_common(1)[0]
    await asyncio.to_thread(run.cluster.kill, node)
    await asyncio.sleep(DOWN)
    await asyncio.to_thread(run.cluster.start, node)
    await all_in_sync(run.cluster)
    return f"{node}({count})"


async def _rolling_restart(run: Run) -> None:
    for node in run.cluster.nodes:
        await asyncio.to_thread(run.cluster.terminate, node.node_id)
        await asyncio.to_thread(run.cluster.start, node.node_id)
        await all_in_sync(run.cluster)


async def _scenario(
    title: str,
    cluster: KafkaCluster,
    partitions: int,
    tmp: Any,
    stack: Any,
    database_url: str,
    *,
    transactional: bool,
) -> dict[str, Any]:
    topics = await _topics(cluster, partitions)
    row = h.Figures(title, time.monotonic())
    ep = h.Endpoints(cluster.bootstrap, stack.temporal, database_url)
    pipe = h.Pipeline(tmp, ep, topics, "unused")
    run = Run(cluster, topics, pipe, row)
    run.transactional = transactional
    tasks: list[asyncio.Task[Any]] = []
    stop_live = asyncio.Event()
    try:
        await run.live.start()
        await run.open_txns.start()
        following = asyncio.create_task(run.live.follow(stop_live))
        tasks.append(following)
        run.ingress = await pipe.spawn(
            "ingress",
            INGEST_INGRESS_TRANSACTIONAL="true" if transactional else "false",
            INGEST_INGRESS_TRANSACTION_RECORDS="100",
            INGEST_INGRESS_FAULT_COMMIT_DELAY_SECONDS=COMMIT_DELAY,
        )
        producing = asyncio.create_task(
            produce_until(
                cluster.bootstrap, topics.raw, "fault.txingress", run.done, EVENTS, RATE, run.stream
            )
        )
        tasks.append(producing)
        for k in range(1, KILLS + 1):
            await run.progressed(0.2 * k)
            assert not producing.done(), "every kill should land while events flow"
            landed = await run.kill_ingress()
            row.update(kills=k, restarts=k, kills_in_flight=row.get("kills_in_flight", 0) + landed)
        if transactional:
            await run.progressed(0.7)
            row.update(victim=await _leader_kill(run), kills=KILLS + 1, restarts=KILLS + 1)
            await run.progressed(0.75)
            await _rolling_restart(run)
            row.update(restarts=KILLS + 1 + NODES)
        run.done.set()
        await producing
        await pipe.committed_to_end("ingress", h.scaled(120, 600))
        stop_live.set()
        await following
        return await _check(run, transactional, ordered=partitions == 1)
    except BaseException:
        print(pipe.logs())
        raise
    finally:
        run.done.set()
        stop_live.set()
        for task in tasks:
            if not task.done():
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await run.live.stop()
        await run.open_txns.stop()
        await pipe.close()
        row.update()


async def _check(run: Run, transactional: bool, *, ordered: bool) -> dict[str, Any]:
    """Measure into the row first, then assert."""
    t, bootstrap, row = run.topics, run.cluster.bootstrap, run.row
    raw = {(m.partition, m.offset): m for m in await kafka.read_all(bootstrap, t.raw)}
    lost_acked = [c for c, v in run.stream.acked.items() if c not in raw or raw[c].value != v]
    bad = {c for c, m in raw.items() if m.value.startswith(BAD_PREFIX)}
    good = set(raw) - bad
    final = await read_everything(bootstrap, t.events, t.dlq, "read_committed")
    java = await read_everything_java(bootstrap, t.events, t.dlq, "read_committed")
    log = await read_everything(bootstrap, t.events, t.dlq, "read_uncommitted")
    live, end = run.live.seen.figures(good, bad), final.figures(good, bad)
    by_java = java.figures(good, bad)
    row.update(
        events=len(raw),
        lost=end["lost"],
        duplicate_runs=end["duplicates"],  # here: records the final reader saw twice
        dlq=sum(final.dlq.values()),
        dlq_expected=len(bad),
        live_lost=live["lost"],
        live_duplicates=live["duplicates"],
        java_lost=by_java["lost"],
        java_duplicates=by_java["duplicates"],
        # One events partition: raw order kept; several: events are keyed by event_id across
        # them, so there is no order to keep.
        out_of_order=end["out_of_order"] if ordered else "n/a",
        aborted_copies=log.total - final.total,
        uncommitted_duplicates=log.figures(good, bad)["duplicates"],
        acked_lost=len(lost_acked),
        producer_retries=run.stream.retries,
    )
    assert not lost_acked, f"{len(lost_acked)} acknowledged raw writes lost"
    if transactional:
        run.live.seen.check(good, bad, ordered=ordered)
        final.check(good, bad, ordered=ordered)
        java.check(good, bad, ordered=ordered)
        assert row["aborted_copies"] > 0, "no kill landed inside an open transaction"
    else:
        # The control: the same kills in the plain mode write copies a reader sees twice.
        assert end["lost"] == 0
        assert end["duplicates"] > 0, "plain mode showed no duplicate: the check cannot fail"
        assert by_java["duplicates"] == end["duplicates"], (by_java, end)
    return dict(row)


@pytest.mark.timeout(h.scaled(400, 2400))
@pytest.mark.parametrize("partitions", SIZES)
async def test_transactional_ingress_is_exactly_once(
    partitions, stack, kafka_cluster, database_url, tmp_path
):
    figures = await _scenario(
        f"17 transactional ingress, {partitions} partition(s)",
        kafka_cluster,
        partitions,
        tmp_path,
        stack,
        database_url,
        transactional=True,
    )
    assert (figures["lost"], figures["duplicate_runs"]) == (0, 0)


@pytest.mark.timeout(h.scaled(300, 1200))
@pytest.mark.parametrize("partitions", [1])
async def test_plain_ingress_duplicates_under_the_same_kills(
    partitions, stack, kafka_cluster, database_url, tmp_path
):
    figures = await _scenario(
        "18 plain ingress (control), 1 partition",
        kafka_cluster,
        partitions,
        tmp_path,
        stack,
        database_url,
        transactional=False,
    )
    assert figures["duplicate_runs"] > 0
