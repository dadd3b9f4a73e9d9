"""Scenario 19: emit exactly once through the outbox relay, Kafka's transactions test ported.

The idea of Kafka's own transactions system test (apache/kafka
``tests/kafkatest/tests/core/transactions_test.py``), not its code: on a 3-broker
KRaft cluster (RF 3, ``min.insync.replicas`` 2), clients and a broker are killed
hard while a stream flows, and a ``read_committed`` consumer must see the input
set equal to the output set, with 0 duplicates.

Here the input is the emits the runs ask for (``count`` emit tasks per run, keyed
``{data.k}`` so keys repeat): the worker writes each to the outbox with its task's
result, and ``ingest relay`` publishes them in Kafka transactions. While the runs
are started (paced), the worker is SIGKILLed 3 times (after 20, 40, 60 % of the
emits reached the outbox) and the relay 3 times (after 25, 45, 65 % were
published; each relay transaction stays open 0.3 s after its sends, a test-only
setting, so those kills land inside open transactions: the records of the aborted
ones, which a read_uncommitted reader sees, must exist); the broker leading the
relay's progress topic is SIGKILLed once (at 50 %) and restarted 10 s later. Every
kill lands on a running process and is restarted at once. The final
``read_committed`` consumer of the emit topic must see every task id once: the set
of outbox ids (= the expected task ids), 0 duplicates, and each key's records in the
outbox's order; and Kafka's own Java consumer (``ConsoleConsumer --isolation-level
read_committed``) must see the same.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import pytest
from devstack.kafka_inspect import leaders
from temporalio.client import Client
from temporalio.common import WorkflowIDReusePolicy

from pipeline.kafka import header
from schemas.ids import task_workflow_id
from tests.faults import harness as h
from tests.faults.cluster import all_in_sync
from tests.support import db
from tests.support.kafka import read_java
from tests.support.outbox import diagnose, outbox_order, published, read_committed, verdict
from tests.support.runs import event_run
from tests.support.wait import eventually
from workers.run_workflow import RunActivityWorkflow

PER_RUN = 10  # emit tasks per run
RUNS_PER_SECOND = 1.0  # 10 emits/s: within what the worker keeps up with on 2 cores
KEYS = 7
DOWN = 10  # seconds the killed broker stays down
COMMIT_DELAY = "0.3"  # seconds each relay transaction stays open after its sends
# (fraction of emits, what is killed): worker kills count outbox rows, the others
# count rows the relay committed.
KILLS = [(0.2, "worker"), (0.25, "relay"), (0.4, "worker"), (0.45, "relay"),
         (0.5, "leader"), (0.6, "worker"), (0.65, "relay")]  # fmt: skip
EMIT = {"type": "emit", "count": PER_RUN, "config": {"key": "{data.k}"}}


async def _start_paced(
    temporal: Client, aid: str, task_queue: str, n: int, runs: list[Any]
) -> None:
    for i in range(n):
        run = event_run(aid, data={"k": f"k{i % KEYS}"})
        runs.append(run)
        await temporal.start_workflow(
            RunActivityWorkflow.run,
            run,
            id=run.workflow_id,
            task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
        await asyncio.sleep(1 / RUNS_PER_SECOND)


async def _count(pool: asyncpg.Pool) -> int:
    return int(await pool.fetchval("SELECT count(*) FROM outbox"))


SIZES = [
    pytest.param(400, id="reduced"),
    # `make faults`: the 5,000 emits (about 9 minutes at 1 run/s).
    pytest.param(5000, id="full", marks=pytest.mark.slow),
]


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("emits", SIZES)
async def test_relay_emits_exactly_once_under_kills(
    emits: int,
    stack: Any,
    kafka_cluster: Any,
    cluster_topics: Any,
    database_url: str,
    db_pool: asyncpg.Pool,
    task_queue: str,
    temporal: Client,
    fault: h.Scenario,
) -> None:
    aid = await db.seed_activity(db_pool, f"fault.relay.{uuid.uuid4().hex[:8]}", tasks=[EMIT])
    instance = f"f-{uuid.uuid4().hex[:8]}"
    progress_topic = f"progress-{instance}"
    ep = h.Endpoints(kafka_cluster.bootstrap, stack.temporal, database_url)
    pipe = fault.pipeline(ep, cluster_topics, task_queue)
    scale = "full" if emits >= 5000 else "reduced"
    figures = fault.figures("19 outbox relay: relay, worker, leader SIGKILL", events=emits)
    figures.update(scale=scale)
    worker = await pipe.spawn("worker")
    relay = await pipe.spawn(
        "relay",
        INGEST_RELAY_INSTANCE=instance,
        INGEST_RELAY_PROGRESS_TOPIC=progress_topic,
        INGEST_RELAY_BATCH_SIZE="25",
        INGEST_RELAY_POLL_INTERVAL_MS="50",
        INGEST_RELAY_LOCK_RETRY_SECONDS="0.2",
        # Each transaction stays open a while after its records are sent, so the relay
        # kills land inside open transactions (checked: aborted_copies > 0).
        INGEST_RELAY_FAULT_COMMIT_DELAY_SECONDS=COMMIT_DELAY,
    )
    runs: list[Any] = []
    starter = asyncio.create_task(_start_paced(temporal, aid, task_queue, emits // PER_RUN, runs))
    fault.cleanup(lambda: _cancel(starter))
    at_kill: list[str] = []
    mid_stream: list[bool] = []
    victim = None
    broker: asyncio.Task[None] | None = None
    for fraction, what in KILLS:
        mark = int(emits * fraction)
        count = (lambda: _count(db_pool)) if what == "worker" else (
            lambda: published(db_pool, instance)
        )  # fmt: skip

        async def reached(
            count: Any = count, mark: int = mark, alive: tuple[h.Child, ...] = (worker, relay)
        ) -> bool:
            for child in alive:
                child.assert_alive()
            return bool(await count() >= mark)

        await eventually(reached, 240 + emits // 5, f"{mark} emits for the {what} kill")
        now = await count()
        at_kill.append(f"{what}@{now}")
        mid_stream.append(now < emits)
        if what == "worker":
            await worker.kill()
            worker = await pipe.restart(worker)
        elif what == "relay":
            # The emits come in bursts (a run's 10 at once, 1 run/s), and the mark is reached
            # just after a commit, when the relay idles until the next burst: kill it inside
            # the transaction of the next one (rows pending, within its commit delay).
            await eventually(lambda: _pending(db_pool, instance), 60, "rows for the relay")
            await asyncio.sleep(float(COMMIT_DELAY) / 2)
            await relay.kill()
            relay = await pipe.restart(relay)
        else:  # in the background: the next kills land while the broker is down
            victim = (await leaders(kafka_cluster.bootstrap, progress_topic))[0]
            await asyncio.to_thread(kafka_cluster.kill, victim)
            broker = asyncio.create_task(_restart_later(kafka_cluster, victim))
        figures.update(kills=len(at_kill), restarts=len(at_kill))
    await starter
    if broker is not None:
        await broker
    await eventually(
        lambda: _is(db_pool, instance, emits), 300 + emits // 5, "every emit published"
    )
    # Every run closed, so no workflow is left running on the shared server.
    results = await asyncio.wait_for(
        asyncio.gather(*(temporal.get_workflow_handle(r.workflow_id).result() for r in runs)), 300
    )
    records = await read_committed(kafka_cluster.bootstrap, cluster_topics.out, emits)
    order = await outbox_order(db_pool)
    v = verdict(records, order)
    # The same check by Kafka's own Java consumer: a reader nobody here wrote. And what a
    # reader of uncommitted data meets besides: the records of aborted transactions.
    out = kafka_cluster.bootstrap, cluster_topics.out
    java = verdict(await asyncio.to_thread(read_java, *out), order)
    log = await asyncio.to_thread(read_java, *out, "read_uncommitted")
    expected = {task_workflow_id(r.run_id, "emit", i) for r in runs for i in range(PER_RUN)}
    outbox_ids = {i for ids in order.values() for i in ids}
    seen = {(header(m.headers, "task_id") or b"").decode() for m in records}
    if v.missing or v.duplicates:  # where the difference is, for the figures and the log
        found = await diagnose(kafka_cluster.bootstrap, cluster_topics.out, outbox_ids - seen)
        print(f"diagnosis: {found}")
        figures.update(diagnosis=found)
    figures.update(
        lost=v.missing + len(expected - outbox_ids),
        duplicate_runs=v.duplicates,
        dlq=0,
        dlq_expected=0,
        runs=len(runs),
        read_committed=v.seen,
        java_read_committed=java.seen,
        aborted_copies=len(log) - java.seen,
        out_of_order_keys=v.out_of_order_keys,
        broker_killed=victim,
        kills_at="+".join(at_kill),
    )
    assert {r["status"] for r in results} == {"succeeded"}
    assert mid_stream == [True] * len(KILLS), f"every kill should land mid-stream: {at_kill}"
    assert outbox_ids == expected, (len(outbox_ids), len(expected))
    v.check()
    java.check()
    assert len(log) > java.seen, "no relay kill landed inside an open transaction"


async def _pending(pool: asyncpg.Pool, instance: str) -> bool:
    return await _count(pool) > await published(pool, instance)


async def _is(pool: asyncpg.Pool, instance: str, n: int) -> bool:
    return await published(pool, instance) >= n


async def _restart_later(cluster: Any, node: int) -> None:
    await asyncio.sleep(DOWN)
    await asyncio.to_thread(cluster.start, node)
    await all_in_sync(cluster)


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
