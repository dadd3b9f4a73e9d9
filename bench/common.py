"""What every benchmark needs: an isolated database/topics/task queue, sampling, results."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import orjson
from aiokafka import AIOKafkaProducer
from temporalio.client import Client

from definitions import store
from pipeline import db, kafka, settings
from pipeline.clients import ensure_topics, temporal_client
from pipeline.runtime import Shutdown
from schemas.definitions import ActivityDef, EventTrigger, TaskDef
from workers.handlers import load_registry
from workers.parts import PartFactory
from workers.settings import WorkerSettings
from workers.worker import run_worker

RESULTS = Path(__file__).resolve().parent / "results"
PARTITIONS = 3


@dataclass
class Env:
    """A fresh database (migrated), fresh topics and a fresh task queue on the running stack."""

    cfg: settings.Settings
    pool: asyncpg.Pool
    client: Client
    admin_url: str
    db_name: str
    tag: str


def _with_db(url: str, name: str) -> str:
    return f"{url.rpartition('/')[0]}/{name}"


async def make_env(name: str, temporal_address: str | None = None) -> Env:
    """``temporal_address``: another Temporal server than the settings' (bench.e2e's
    ``--temporal server``)."""
    base = settings.load_settings()
    tag = f"{name}-{uuid.uuid4().hex[:8]}"
    admin_url = base.database.url.get_secret_value()
    db_name = "bench_" + tag.replace("-", "_")
    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute(f'CREATE DATABASE "{db_name}"')
    finally:
        await conn.close()
    url = _with_db(admin_url, db_name)
    conn = await asyncpg.connect(url)
    try:
        await db.migrate(conn)
    finally:
        await conn.close()
    topics = {t: f"bench-{t}-{tag}" for t in ("raw", "events", "dlq")}
    cfg = settings.load_settings(
        kafka__raw_topic=topics["raw"],
        kafka__events_topic=topics["events"],
        kafka__dlq_topic=topics["dlq"],
        kafka__partitions=PARTITIONS,
        temporal__task_queue=f"bench-{tag}",
        database__url=url,
        process__metrics_port=0,
        process__log_level="WARNING",
        temporal__address=temporal_address or base.temporal.address,
    )
    await ensure_topics(cfg.kafka, list(topics.values()), PARTITIONS)
    pool = await db.create_pool(url, 1, 10)
    # The production client (pipeline.clients): the worker this process starts decodes
    # with the converter `ingest worker` uses (schemas.converter), not the SDK default.
    client = await temporal_client(cfg.temporal)
    return Env(cfg, pool, client, admin_url, db_name, tag)


async def drop_env(env: Env) -> None:
    """Throw the environment away: its workflows still running (a run cut short by an
    error or Ctrl-C would otherwise stay open in the namespace, on a queue no worker
    serves any more), then its database."""
    queue = env.cfg.temporal.task_queue
    try:
        left = await terminate_left_running(env.client, queue)
    except Exception as exc:  # the server gone: still drop the database
        print(f"bench: could not terminate what runs on {queue}*: {exc}", file=sys.stderr)
    else:
        if left:
            print(f"bench: terminated {left} workflows left running on {queue}*")
    await env.pool.close()
    conn = await asyncpg.connect(env.admin_url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{env.db_name}" WITH (FORCE)')
    finally:
        await conn.close()


async def terminate_left_running(client: Client, queue_prefix: str) -> int:
    """Terminate the running workflows on task queues that start with ``queue_prefix``
    (the environment's queue and the ones derived from it, such as bench.e2e's bare
    queue); how many. Visibility is eventually consistent: a run that closed meanwhile
    answers NOT_FOUND and is not counted."""
    running = [
        w
        async for w in client.list_workflows('ExecutionStatus="Running"')
        if w.task_queue.startswith(queue_prefix)
    ]
    handles = [client.get_workflow_handle(w.id, run_id=w.run_id) for w in running]
    results = await asyncio.gather(
        *(h.terminate("bench ended") for h in handles), return_exceptions=True
    )
    return sum(not isinstance(r, BaseException) for r in results)


def process_env(
    cfg: settings.Settings, *, events_topic: str, task_queue: str, group: str
) -> dict[str, str]:
    """The environment of an ``ingest ingress|router|worker`` subprocess on ``cfg``'s stack."""
    return {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": cfg.kafka.bootstrap_servers,
        "KAFKA_RAW_TOPIC": cfg.kafka.raw_topic,
        "KAFKA_EVENTS_TOPIC": events_topic,
        "KAFKA_DLQ_TOPIC": cfg.kafka.dlq_topic,
        "TEMPORAL_ADDRESS": cfg.temporal.address,
        "TEMPORAL_NAMESPACE": cfg.temporal.namespace,
        "TEMPORAL_TASK_QUEUE": task_queue,
        "DATABASE_URL": cfg.database.url.get_secret_value(),
        "INGEST_ROUTER_GROUP": group,
        "INGEST_INGRESS_GROUP": f"{group}-ingress",
        "INGEST_METRICS_PORT": "0",
        "INGEST_LOG_LEVEL": "WARNING",
    }


async def spawn(
    kind: str, environ: dict[str, str], log: Path | None = None
) -> asyncio.subprocess.Process:
    """``ingest <kind>`` as a real process; its output goes to ``log`` (or is discarded)."""
    out = log.open("wb") if log is not None else asyncio.subprocess.DEVNULL
    try:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "app.cli",
            kind,
            env=environ,
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
        )
    finally:
        if log is not None and not isinstance(out, int):
            out.close()


async def stop(
    procs: Iterable[asyncio.subprocess.Process], kill_after: float | None = 30.0
) -> list[int]:
    """SIGTERM to each of ``procs`` still running, then their exit codes in order. One that
    has not exited ``kill_after`` s later is killed (None: wait for it however long)."""
    procs = list(procs)
    for p in procs:
        if p.returncode is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            await asyncio.wait_for(p.wait(), kill_after)
        except TimeoutError:
            p.kill()
            await p.wait()
    return [p.returncode for p in procs]  # type: ignore[misc]


def start_worker(
    env: Env, parts: Sequence[PartFactory], worker_settings: WorkerSettings | None = None
) -> tuple[asyncio.Task[int], Shutdown]:
    """The production worker (``run_worker``) in this process, serving ``parts``."""
    shutdown = Shutdown()
    worker = asyncio.create_task(
        run_worker(
            env.cfg,
            shutdown,
            client=env.client,
            pool=env.pool,
            registry=load_registry(use_entry_points=False),
            worker_settings=worker_settings or WorkerSettings(),
            parts=parts,
        )
    )
    return worker, shutdown


async def seed_activity(
    pool: asyncpg.Pool, event_type: str, tasks: list[dict[str, Any]] | None = None
) -> str:
    aid = uuid.uuid4()
    act = ActivityDef(
        id=aid,
        name=f"bench {aid}",
        trigger=EventTrigger(type="event", event_type=event_type),
        tasks=[TaskDef.model_validate(t) for t in tasks or [{"type": "noop"}]],
    )
    await store.upsert(pool, [act])
    return str(aid)


def event(event_type: str, event_id: str | None, i: int) -> bytes:
    doc: dict[str, Any] = {"type": event_type, "source": "bench", "data": {"n": i, "pad": "x" * 64}}
    if event_id is not None:
        doc["event_id"] = event_id
    return orjson.dumps(doc)


@asynccontextmanager
async def started_producer(cfg: settings.KafkaSettings) -> AsyncIterator[AIOKafkaProducer]:
    """The pipeline's own idempotent producer, started, stopped on exit."""
    producer = kafka.producer(cfg)
    await producer.start()
    try:
        yield producer
    finally:
        await producer.stop()


async def produce(
    cfg: settings.KafkaSettings, topic: str, records: list[tuple[bytes, bytes]]
) -> None:
    """Produce (key, value) records as fast as the idempotent producer allows."""
    async with started_producer(cfg) as producer:
        await _send_all(producer, topic, records)


async def _send_all(
    producer: AIOKafkaProducer, topic: str, records: list[tuple[bytes, bytes]]
) -> None:
    chunk = 5000
    for i in range(0, len(records), chunk):
        futs = [await producer.send(topic, v, key=k) for k, v in records[i : i + chunk]]
        await asyncio.gather(*futs)


async def closed_loop(
    n: int, in_flight: int, one: Callable[[int], Awaitable[object]]
) -> list[float]:
    """Run ``one(0) .. one(n-1)`` with ``in_flight`` of them running at any time.

    A closed loop: the next one starts when one finishes, so the system under test
    sees a steady ``in_flight`` load instead of a burst. Returns each finish time
    (``time.perf_counter()``), in finish order.
    """
    todo = iter(range(n))
    finishes: list[float] = []

    async def lane() -> None:
        for i in todo:  # shared: each lane takes the next index
            await one(i)
            finishes.append(time.perf_counter())

    await asyncio.gather(*(lane() for _ in range(min(in_flight, n))))
    return finishes


def steady_rate(finishes: Sequence[float], trim: float = 0.1) -> float:
    """Finishes per second between the first and last ``trim`` of them (ramp-up and
    drain left out); all of them when there are too few to trim."""
    cut = int(len(finishes) * trim)
    lo, hi = cut, len(finishes) - 1 - cut
    if hi - lo < 2:
        lo, hi = 0, len(finishes) - 1
    span = finishes[hi] - finishes[lo]
    return (hi - lo) / span if span > 0 else float("nan")


@dataclass
class Sampler:
    """Samples ``counter()`` every ``every`` seconds: the throughput-over-time series."""

    counter: Callable[[], int]
    every: float = 0.25
    points: list[tuple[float, int]] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        t0 = time.monotonic()

        async def loop() -> None:
            while True:
                self.points.append((round(time.monotonic() - t0, 3), self.counter()))
                await asyncio.sleep(self.every)

        self._task = asyncio.create_task(loop())

    async def stop(self) -> list[tuple[float, int]]:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        return self.points


def write_result(name: str, figures: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(figures, indent=2, sort_keys=True, default=str))
    return path


def verdict(
    name: str, ratio: float, target: float, *, at_most: bool = False, unit: str = ""
) -> str:
    """The benchmark's last line: ``<name>: <ratio> (target >= t) PASS|MISS``."""
    ok = ratio <= target if at_most else ratio >= target
    op = "<=" if at_most else ">="
    return f"{name}: {ratio:.3g}{unit} (target {op} {target:g}{unit}) {'PASS' if ok else 'MISS'}"


async def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(0.05)
