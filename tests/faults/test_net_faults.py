"""Network faults (issue 40): toxics between the pipeline's processes and its servers.

The real ``ingress``/``router``/``worker`` processes reach Kafka (through the broker's
PROXIED listener), the Temporal frontend and PostgreSQL only through Toxiproxy
(``tests/support/toxiproxy.py``: ``proxied``); the producer and every check go to the
servers directly. While events flow:

* latency, 500 ms +/- 200 ms on every answer, to each server in turn for ``PERIOD``;
* ``reset_peer`` on the Temporal frontend during starts: answers held back 1 s, then
  every connection reset, again and again, so a start the server made may never have
  been answered: its retry must be a duplicate, never a second run;
* 64 KB/s each way to Kafka for ``PERIOD``;
* one of two routers half-open to Kafka for ``PERIOD``: its partitions move to the
  other, and no committed offset of the group ever goes back;
* ``timeout`` (half-open) to PostgreSQL for ``PERIOD``: what the processes send is
  dropped and the sockets stay open; no process may hang for ever.

Each records events, lost, duplicate runs, the longest stall (no run finished while
some were still to come) and the time to recover after the toxic went (until every
event produced before its removal has its finished run), then checks the invariant.
Slow (``make faults``, with ``INGEST_STACK_KAFKA_PROXIED_PORT`` set: docs/faults.md).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field

import asyncpg
import pytest
from temporalio.client import Client

from pipeline.db import COMMAND_TIMEOUT
from tests.faults import harness as h
from tests.support import db, metrics
from tests.support import toxiproxy as support
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

toxiproxy = support.toxiproxy
proxied = support.proxied

# The sizes (1,000 events, 60 s toxics) under FAULTS_SCALE=full (make faults).
N = h.scaled(300, 1000)
PERIOD = h.scaled(20, 60)  # seconds each toxic stays
LIMIT = h.scaled(900, 1800)
# s: how long a query may wait on a link that answers nothing: the statement's bound
# (DATABASE_COMMAND_TIMEOUT's default), then asyncpg's cancel request on the same dead link.
HALF_OPEN_BOUND = 2 * COMMAND_TIMEOUT + 10
BASELINE = 8  # seconds of flow without a toxic, for the stall to compare with
LATENCY = {"latency": 500, "jitter": 200}  # ms, on every answer (downstream)
BANDWIDTH_KB = 64  # KB/s, each way


@dataclass
class Progress:
    """Finished runs over time, sampled every 0.25 s straight from PostgreSQL."""

    pool: asyncpg.Pool
    samples: list[tuple[float, int]] = field(default_factory=list)

    async def run(self) -> None:
        while True:
            n = await self.pool.fetchval(
                "SELECT count(*) FROM activity_runs WHERE status = 'succeeded'"
            )
            self.samples.append((time.monotonic(), int(n)))
            await asyncio.sleep(0.25)

    def longest_stall(self, start: float, end: float, total: int) -> float:
        """The longest time within [start, end] in which no run finished although fewer
        than ``total`` had."""
        longest, since, last = 0.0, start, -1
        for t, n in self.samples:
            if t < start:
                last = n
                continue
            if t > end:
                break
            if n != last or n >= total:
                longest = max(longest, t - since)
                since, last = t, n
        return round(max(longest, min(end, self.samples[-1][0]) - since), 1)

    def recovered_at(self, after: float, target: int) -> float | None:
        """When ``target`` runs had finished, at or after ``after``."""
        return next((t for t, n in self.samples if t >= after and n >= target), None)


@dataclass
class Flow:
    """The pipeline behind the proxies, events flowing, progress sampled."""

    pipe: h.Pipeline
    produced: h.Produced
    producing: asyncio.Task[None]
    progress: Progress
    sampling: asyncio.Task[None]
    children: list[h.Child]
    activity: str
    baseline_stall: float = 0.0  # the longest stall before any toxic

    def alive(self) -> None:
        for c in self.children:
            c.assert_alive()


async def _start(fault, stack, topics, task_queue, db_pool, proxied, database_url, name, seconds):
    etype = f"fault.net.{name}.{uuid.uuid4().hex[:8]}"
    aid = await db.seed_activity(db_pool, etype)
    ep = h.Endpoints(
        proxied.kafka.listen, proxied.temporal.listen, proxied.database_url(database_url)
    )
    pipe = fault.pipeline(ep, topics, task_queue)
    # The session's namespace: through the proxy, the address is not the stack's own.
    ns = {"TEMPORAL_NAMESPACE": stack.namespace}
    children = [
        await pipe.spawn("ingress", metrics=True, **ns),
        await pipe.spawn("worker", metrics=True, **ns),
        await pipe.spawn("router", metrics=True, **ns),
    ]
    produced = h.Produced()
    producing = asyncio.create_task(
        h.produce_paced(stack.kafka, topics.raw, N, etype, seconds, produced, batch=2)
    )
    progress = Progress(db_pool)
    sampling = asyncio.create_task(progress.run())
    fault.cleanup(lambda: _cancel(sampling))
    flow = Flow(pipe, produced, producing, progress, sampling, children, aid)

    async def running() -> bool:
        flow.alive()
        return await db_pool.fetchval("SELECT count(*) FROM activity_runs") > 0

    await eventually(running, 90, "the first run through the proxies")
    _through_proxies(children, proxied, stack)
    await asyncio.sleep(BASELINE)
    now = time.monotonic()
    flow.baseline_stall = progress.longest_stall(now - BASELINE, now, N)
    return flow


def _local_ports(child: h.Child, remote_port: int) -> set[int]:
    """``child``'s local ports of its established connections to ``remote_port``."""
    import psutil

    assert child.proc is not None
    return {
        c.laddr.port
        for c in psutil.Process(child.proc.pid).net_connections(kind="tcp")
        if c.raddr and c.raddr.port == remote_port and c.status == psutil.CONN_ESTABLISHED
    }


def _through_proxies(children: list[h.Child], proxied, stack) -> None:
    """The processes' connections go to the proxies, none to a server directly (a
    client that learnt the broker's own address would bypass every toxic)."""
    import psutil

    direct = {
        int(stack.kafka.rpartition(":")[2]),
        int(stack.temporal.rpartition(":")[2]),
        int(stack.admin_db_url.split("@")[-1].split("/")[0].rpartition(":")[2]),
        int(proxied.kafka.upstream.rpartition(":")[2]),  # the PROXIED listener itself
    }
    ports = {
        c.raddr.port
        for child in children
        if child.proc is not None
        for c in psutil.Process(child.proc.pid).net_connections(kind="tcp")
        if c.raddr and c.status == psutil.CONN_ESTABLISHED
    }
    assert not ports & direct, f"connections around the proxies: {sorted(ports & direct)}"
    want = {p.port for p in proxied.by_server().values()}
    assert want <= ports, f"no connection through the proxies {sorted(want - ports)}"


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _toxic_period(
    flow: Flow, client, proxy, type, attrs, stream, seconds, during=None
) -> dict:
    """``type`` on ``proxy`` for ``seconds``; then the figures of that period: the longest
    stall during it and the seconds until the backlog it left was worked off (and what
    ``during()`` found at its end, e.g. which processes called themselves ready)."""
    begin = time.monotonic()
    seen: dict[str, str] = {}
    with support.toxic(client, proxy, type, attrs, stream=stream):
        await asyncio.sleep(seconds)
        if during is not None:
            seen |= {f"{k}_during": v for k, v in (await during()).items()}
    removed = time.monotonic()
    backlog = len(flow.produced.coords)
    await eventually(
        lambda: _finished(flow, backlog), 300, f"the runs held back by {type} on {proxy.name}"
    )
    at = flow.progress.recovered_at(removed, backlog) or time.monotonic()
    return {
        "stall": flow.progress.longest_stall(begin, removed, N),
        "recover": round(at - removed, 1),
        **seen,
    }


async def _finished(flow: Flow, target: int) -> bool:
    flow.alive()
    return bool(flow.progress.samples) and flow.progress.samples[-1][1] >= target


async def _finish(flow: Flow, fault, stack, topics, db_pool, figures, since: float) -> None:
    await flow.producing
    temporal = await Client.connect(stack.temporal, namespace=stack.namespace)
    expected = h.expected_workflow_ids([flow.activity], topics.raw, flow.produced.coords)
    try:
        await flow.pipe.verify(temporal, db_pool, expected, figures, reduced_timeout=300)
    finally:
        figures.update(
            stall=flow.progress.longest_stall(since, time.monotonic(), N),
            stall_before=flow.baseline_stall,
        )
    await flow.pipe.committed_to_end("router", 60)
    flow.alive()


async def _pg_connections(stack, database_url: str) -> int:
    name = database_url.rpartition("/")[2]
    conn = await asyncpg.connect(stack.admin_db_url)
    try:
        return int(
            await conn.fetchval("SELECT count(*) FROM pg_stat_activity WHERE datname = $1", name)
        )
    finally:
        await conn.close()


@pytest.mark.timeout(LIMIT)
async def test_net_latency_each_server(
    stack, topics, task_queue, db_pool, database_url, proxied, fault
):
    figures = fault.figures("net latency 500±200 ms", events=N, kills=0, dlq=0, dlq_expected=0)
    flow = await _start(
        fault, stack, topics, task_queue, db_pool, proxied, database_url, "lat", 3.5 * PERIOD
    )
    since = time.monotonic()
    for server, proxy in proxied.by_server().items():
        got = await _toxic_period(
            flow, proxied.client, proxy, "latency", LATENCY, "downstream", PERIOD
        )
        figures.update(**{f"{k}_{server}": v for k, v in got.items()})
    await _finish(flow, fault, stack, topics, db_pool, figures, since)


@pytest.mark.timeout(LIMIT)
async def test_net_kafka_bandwidth(
    stack, topics, task_queue, db_pool, database_url, proxied, fault
):
    """64 KB/s each way between the processes and Kafka for ``PERIOD``: fetches, produces,
    commits and heartbeats share it; nothing is lost, nothing runs twice, and the
    processes stay in their groups (no rebalance storm)."""
    figures = fault.figures("net bandwidth 64 KB/s Kafka", events=N, kills=0, dlq=0, dlq_expected=0)
    flow = await _start(
        fault, stack, topics, task_queue, db_pool, proxied, database_url, "bw", 2 * PERIOD
    )
    since = time.monotonic()
    client, proxy = proxied.client, proxied.kafka
    with support.toxic(client, proxy, "bandwidth", {"rate": BANDWIDTH_KB}, stream="upstream"):
        got = await _toxic_period(
            flow, client, proxy, "bandwidth", {"rate": BANDWIDTH_KB}, "downstream", PERIOD
        )
    figures.update(**got)
    await _finish(flow, fault, stack, topics, db_pool, figures, since)


@pytest.mark.timeout(LIMIT)
async def test_net_one_of_two_routers_half_open_to_kafka(
    stack, topics, task_queue, db_pool, database_url, proxied, fault
):
    """Two routers in one group; the second reaches Kafka through its own proxy (the
    broker's PROXIED_B listener), which goes half-open for ``PERIOD`` (longer than the
    session timeout): the group drops it, its partitions move to the first router and
    flow on; when its link works again it rejoins, and no committed offset of the group
    ever goes back (a stale commit from the cut router would move one back, and its
    events would be routed again)."""
    figures = fault.figures("net one router half-open", events=N, kills=0, dlq=0, dlq_expected=0)
    flow = await _start(
        fault, stack, topics, task_queue, db_pool, proxied, database_url, "2rt", 3 * PERIOD
    )
    ns = {"TEMPORAL_NAMESPACE": stack.namespace}
    cut = await flow.pipe.spawn(
        "router", metrics=True, KAFKA_BOOTSTRAP_SERVERS=proxied.kafka_b.listen, **ns
    )
    flow.children.append(cut)
    group, events = flow.pipe.router_group, topics.events
    commits = Commits(stack.kafka, group, events)
    sampling = asyncio.create_task(commits.run())
    fault.cleanup(lambda: _cancel(sampling))
    since = time.monotonic()

    async def both_assigned() -> bool:
        flow.alive()
        return all("pipeline.rebalance: assigned [(" in c.log(10**7) for c in flow.children[2:])

    await eventually(both_assigned, 60, "both routers to hold partitions")
    await asyncio.sleep(3)
    client, proxy = proxied.client, proxied.kafka_b
    got = await _toxic_period(flow, client, proxy, "timeout", {"timeout": 0}, "upstream", PERIOD)
    figures.update(**got)
    await _finish(flow, fault, stack, topics, db_pool, figures, since)
    await _cancel(sampling)
    figures.update(
        commit_samples=len(commits.samples),
        offsets_back=len(commits.backwards),
        cut_router_commit_failures=sum(
            "commit" in line and "fail" in line for line in cut.log(10**7).splitlines()
        ),
    )
    assert not commits.backwards, f"committed offsets went back: {commits.backwards[:5]}"
    assert len(commits.samples) > 10, "the committed offsets were not sampled"


@dataclass
class Readiness:
    """Each process's ``/readyz``, sampled every 0.5 s."""

    children: list[h.Child]
    samples: list[dict[str, int]] = field(default_factory=list)

    async def run(self) -> None:
        while True:
            self.samples.append(
                {c.kind: (await metrics.readyz(c.metrics_port))[0] for c in self.children}
            )
            await asyncio.sleep(0.5)

    def not_ready(self) -> dict[str, float]:
        """Per process kind, the seconds it answered anything but 200."""
        return {
            c.kind: sum(0.5 for s in self.samples if s.get(c.kind) != 200) for c in self.children
        }

    def ready_at_end(self) -> bool:
        return bool(self.samples) and all(v == 200 for v in self.samples[-1].values())


@dataclass
class Commits:
    """The group's committed offsets of a topic, sampled every 0.5 s; ``backwards`` lists
    each time one went back (partition, from, to)."""

    bootstrap: str
    group: str
    topic: str
    samples: list[dict[int, int | None]] = field(default_factory=list)
    backwards: list[tuple[int, int, int]] = field(default_factory=list)

    async def run(self) -> None:
        from tests.support import kafka

        last: dict[int, int] = {}
        while True:
            now = await kafka.committed(self.bootstrap, self.group, self.topic)
            self.samples.append(now)
            for p, off in now.items():
                if off is None:
                    continue
                if off < last.get(p, -1):
                    self.backwards.append((p, last[p], off))
                last[p] = max(off, last.get(p, -1))
            await asyncio.sleep(0.5)


@pytest.mark.timeout(LIMIT)
async def test_net_reset_temporal_during_starts(
    stack, topics, task_queue, db_pool, database_url, proxied, fault
):
    figures = fault.figures("net reset_peer Temporal", events=N, kills=0, dlq=0, dlq_expected=0)
    flow = await _start(
        fault, stack, topics, task_queue, db_pool, proxied, database_url, "rst", 2 * PERIOD
    )
    router = flow.children[2]
    since = time.monotonic()
    resets = 0
    client, proxy = proxied.client, proxied.temporal
    begin = time.monotonic()
    # Answers held back for 1 s, so every reset drops starts the server already made.
    seen: set[int] = set()  # the router's local ports towards the Temporal proxy
    with support.toxic(client, proxy, "latency", {"latency": 1000}):
        while time.monotonic() - begin < PERIOD:
            for _ in range(5):
                seen |= _local_ports(router, proxy.port)
                await asyncio.sleep(0.5)
            with support.toxic(client, proxy, "reset_peer", {"timeout": 0}):
                resets += 1
                await asyncio.sleep(0.3)
    seen |= _local_ports(router, proxy.port)
    # Each reset made the router connect again: evidence that its link was cut.
    figures.update(router_connections=len(seen))
    removed = time.monotonic()
    backlog = len(flow.produced.coords)
    await eventually(lambda: _finished(flow, backlog), 300, "the runs held back by the resets")
    at = flow.progress.recovered_at(removed, backlog) or time.monotonic()
    figures.update(resets=resets, recover=round(at - removed, 1))
    figures.update(
        start_errors=int(await router.metric("pipeline_start_errors_total", missing_ok=True)),
        already_started=int(
            await router.metric(
                "pipeline_duplicates_suppressed_total", missing_ok=True, layer="temporal"
            )
        ),
    )
    await _finish(flow, fault, stack, topics, db_pool, figures, since)


@pytest.mark.timeout(LIMIT)
async def test_net_postgres_half_open(
    stack, topics, task_queue, db_pool, database_url, proxied, fault
):
    figures = fault.figures("net timeout PostgreSQL", events=N, kills=0, dlq=0, dlq_expected=0)
    flow = await _start(
        fault, stack, topics, task_queue, db_pool, proxied, database_url, "pgto", 2 * PERIOD
    )
    conns_before = await _pg_connections(stack, database_url)
    since = time.monotonic()

    # timeout 0: what the processes send is dropped, their sockets stay open (half-open).
    # Long enough for a statement's bound to pass (DATABASE_COMMAND_TIMEOUT), so the
    # loops that wait on PostgreSQL fail and say so on /readyz while the link is dead.
    readiness = Readiness(flow.children)
    sampling = asyncio.create_task(readiness.run())
    fault.cleanup(lambda: _cancel(sampling))

    async def health() -> dict[str, str]:
        """Which processes answer /healthz (alive) at the end of the period."""
        alive = [c.kind for c in flow.children if await c.ready()]
        return {"healthz": ",".join(alive) or "none"}

    got = await _toxic_period(
        flow,
        proxied.client,
        proxied.postgres,
        "timeout",
        {"timeout": 0},
        "upstream",
        max(PERIOD, COMMAND_TIMEOUT + 10),
        during=health,
    )
    await asyncio.sleep(5)  # /readyz back to 200 once the calls succeed
    await _cancel(sampling)
    figures.update(**got, **{f"not_ready_{k}": v for k, v in readiness.not_ready().items()})
    # The router's ledger lookups retried on the dead link, and it said so (issue 40: it
    # answered 200 throughout before DATABASE_COMMAND_TIMEOUT); every process alive.
    assert readiness.not_ready()["router"] > 0, readiness.samples[-5:]
    assert got["healthz_during"] == "ingress,worker,router", got
    assert readiness.ready_at_end(), readiness.samples[-3:]
    await _finish(flow, fault, stack, topics, db_pool, figures, since)
    figures.update(pg_conns=f"{conns_before}->{await _pg_connections(stack, database_url)}")


@pytest.mark.timeout(120)
async def test_net_postgres_half_open_query_is_bounded(stack, proxied):
    """A pipeline pool's query on a link that stays half-open must end (answer or error)
    within ``HALF_OPEN_BOUND`` s by itself, not only when the link is finally closed."""
    from pipeline import db as pipeline_db

    pool = await pipeline_db.create_pool(proxied.database_url(stack.admin_db_url), 1, 2)
    try:
        await pool.fetchval("SELECT 1")
        client, proxy = proxied.client, proxied.postgres
        with support.toxic(client, proxy, "timeout", {"timeout": 0}, stream="upstream"):
            query = asyncio.create_task(pool.fetchval("SELECT 1"))
            done, _ = await asyncio.wait({query}, timeout=HALF_OPEN_BOUND)
        # The toxic's removal closes the link: the query ends now at the latest.
        await asyncio.gather(query, return_exceptions=True)
        assert done, f"the query still waited after {HALF_OPEN_BOUND} s on a half-open link"
    finally:
        await pool.close()
