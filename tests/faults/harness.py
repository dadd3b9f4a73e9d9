"""Fault-injection harness: real pipeline subprocesses, paced producers, the invariant.

The invariant every scenario checks (:func:`verify`): every unique (activity,
trigger) has exactly one ``activity_runs`` row and exactly one
``RunActivityWorkflow`` execution, nothing is lost, nothing extra exists (an
unstable event id would show up as an extra workflow id), and every planned task
has exactly one ``task_instances`` row.

Scaffolding every scenario shares lives here too: the ``fault`` fixture
(``tests/faults/conftest.py``) gives a :class:`Scenario`, which spawns the
pipeline, records the figures row (before any assert, so a failing run shows its
real numbers), closes everything at the end and prints the process logs when the
test failed.

Size: ``FAULTS_SCALE=full`` (``make faults``) runs the full version; anything
else runs the reduced version CI can afford. Full sizes are derived from the
measured end-to-end throughput so that the whole full-size suite fits in
:data:`SUITE_BUDGET_SECONDS` on a 2-core machine (see :func:`suite_estimate`).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import orjson
from aiokafka import AIOKafkaProducer
from devstack.postgres import Postgres
from devstack.settings import StackSettings

from pipeline import db
from schemas import ids
from tests.support import ROOT, kafka, metrics
from tests.support.net import free_port
from tests.support.process import clean_env
from tests.support.wait import eventually, quiet, wait_until

FULL = os.environ.get("FAULTS_SCALE", "").lower() == "full"

# One row per scenario run; printed by tests/faults/conftest.py.
FIGURES: list[dict[str, Any]] = []


def scaled(reduced: Any, full: Any) -> Any:
    return full if FULL else reduced


# --- sizing ------------------------------------------------------------------------
#
# The whole pipeline from the raw topic finishes about 6 runs/s with one noop
# task on 2 cores (README "Measured"); the Temporal dev server is the ceiling, and
# a run with 3 tasks costs about 3 runs' worth. Full sizes below keep the whole
# full-size suite inside the budget at that rate, counting each scenario's fixed
# costs too (process starts, kills and restarts, outages, rebalances, final waits).
THROUGHPUT = 6.0  # finished one-task runs per second, end to end
SUITE_BUDGET_SECONDS = 75 * 60  # 60 min, plus 15 for the real server's three scenarios


@dataclass(frozen=True)
class Size:
    """A scenario's full size: runs it drives and seconds of fixed cost around them."""

    runs: int
    tasks_per_run: int = 1
    fixed_seconds: int = 60

    def seconds(self) -> float:
        return self.runs * self.tasks_per_run / THROUGHPUT + self.fixed_seconds


FULL_SIZES = {
    # 10 kills x (restart ~3 s + waiting for progress ~2 s)
    "router_kill": Size(2000, fixed_seconds=120),
    # throttled at 4 starts/s: the last run starts runs/4 s after the burst; 5 kills
    "flow_throttle_kill": Size(600, fixed_seconds=180),
    # 10 kills x ~10 s consumer-group rebalance; producing is spread over 200 s
    "ingress_kill": Size(2000, fixed_seconds=240),
    # 3 tasks per run; 10 kills x (restart + retried attempts after 5-15 s timeouts)
    "worker_kill": Size(500, tasks_per_run=3, fixed_seconds=240),
    # private dev server start/stop/start, 30 s outage
    "temporal_outage": Size(1200, fixed_seconds=120),
    # private PostgreSQL start/stop/start + migrations, 30 s outage
    "postgres_outage": Size(1200, fixed_seconds=120),
    # private broker start/stop/start, 20 s down
    "kafka_restart": Size(1200, fixed_seconds=150),
    # rebalance, then a second router group replays everything (no new runs)
    "rebalance_replay": Size(1500, fixed_seconds=150),
    # bad input corpus x 5 rounds, 50,000-case parser property test, bad configs
    "bad_input_and_config": Size(0, fixed_seconds=300),
    # the real server in its split shape (tests/faults/test_temporal_server_faults.py):
    # a private server's start (~10 s), the fault, and waiting out the ~5 s membership
    # timeout or the 30 s PostgreSQL outage
    "server_history_kill": Size(1000, fixed_seconds=90),
    "server_frontend_kill": Size(1000, fixed_seconds=90),
    "server_postgres_outage": Size(1000, fixed_seconds=120),
    # batches of 10 (1,000 events, 100 runs); 6 kills of router and worker together
    # x (restarts ~10 s + waiting for progress)
    "flow_window_kill": Size(100, fixed_seconds=150),
}


def suite_estimate() -> float:
    """Seconds the full-size suite needs at :data:`THROUGHPUT`."""
    return sum(s.seconds() for s in FULL_SIZES.values())


def events(scenario: str, reduced: int) -> int:
    """The event count of ``scenario`` at the current scale."""
    return scaled(reduced, FULL_SIZES[scenario].runs)


# Time limits are not sizing: they only stop a hung run. They assume a rate well
# below THROUGHPUT (a machine shared with other work), plus 10 minutes.
LIMIT_RATE = 2.5


def drain_seconds(runs: int, tasks_per_run: int = 1) -> int:
    """How long full-size verification may wait for ``runs`` to finish."""
    return int(runs * tasks_per_run / LIMIT_RATE) + 600


# --- processes -------------------------------------------------------------------


@dataclass
class Endpoints:
    kafka: str
    temporal: str
    database_url: str


class Child:
    """One ``python -m app.cli <kind>`` process; output goes to a log file."""

    def __init__(self, kind: str, env: dict[str, str], logfile: Path) -> None:
        self.kind = kind
        self.env = env
        self.logfile = logfile
        self.proc: asyncio.subprocess.Process | None = None
        self.metrics_port = int(env.get("INGEST_METRICS_PORT", "0"))

    async def start(self) -> Child:
        with self.logfile.open("ab") as out:
            out.write(f"\n===== start {time.strftime('%H:%M:%S')} =====\n".encode())
            out.flush()
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "app.cli",
                self.kind,
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
            )
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def kill(self) -> None:
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()

    async def stop(self, timeout: float = 40) -> int:
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), timeout)
            except TimeoutError:
                self.proc.send_signal(signal.SIGKILL)
                await self.proc.wait()
        return int(self.proc.returncode or 0)

    def log(self, tail: int = 4000) -> str:
        return self.logfile.read_text(errors="replace")[-tail:]

    def assert_alive(self) -> None:
        if not self.alive:
            raise AssertionError(f"{self.kind} exited unexpectedly:\n{self.log()}")

    async def metric(self, name: str, *, missing_ok: bool = False, **labels: str) -> float:
        """Sum of the samples of ``name`` matching ``labels`` on this process's /metrics.

        An unknown metric always fails; a known one without a matching series fails
        unless ``missing_ok`` (a labelled counter never incremented has no series).
        """
        return await metrics.scrape(self.metrics_port, name, missing_ok=missing_ok, **labels)

    async def ready(self) -> bool:
        return await metrics.healthy(self.metrics_port)


class Pipeline:
    """Spawns ingress / router / worker subprocesses wired to one set of endpoints."""

    def __init__(self, tmp: Path, ep: Endpoints, topics: Any, task_queue: str) -> None:
        self.tmp = tmp
        self.ep = ep
        self.topics = topics
        self.task_queue = task_queue
        self.tag = uuid.uuid4().hex[:8]
        self.router_group = f"rt-{self.tag}"
        self.ingress_group = f"ing-{self.tag}"
        self.children: list[Child] = []
        self._n = Counter[str]()

    def env(self, kind: str, metrics: bool = False, **extra: str) -> dict[str, str]:
        env = clean_env(
            **{
                "KAFKA_BOOTSTRAP_SERVERS": self.ep.kafka,
                "KAFKA_RAW_TOPIC": self.topics.raw,
                "KAFKA_EVENTS_TOPIC": self.topics.events,
                "KAFKA_DLQ_TOPIC": self.topics.dlq,
                "INGEST_EMIT_TOPIC": self.topics.out,
                "TEMPORAL_ADDRESS": self.ep.temporal,
                "TEMPORAL_TASK_QUEUE": self.task_queue,
                "DATABASE_URL": self.ep.database_url,
                "INGEST_ROUTER_GROUP": self.router_group,
                "INGEST_INGRESS_GROUP": self.ingress_group,
                "INGEST_METRICS_PORT": str(free_port()) if metrics else "0",
                "INGEST_ROUTER_COMMIT_INTERVAL_MS": "200",
                "INGEST_SHUTDOWN_GRACE_SECONDS": "5",
                "INGEST_ROUTER_REFRESH_SECONDS": "2",
            }
        )
        env.update(extra)
        return env

    async def spawn(self, kind: str, metrics: bool = False, **extra: str) -> Child:
        self._n[kind] += 1
        log = self.tmp / f"{kind}-{self._n[kind]}.log"
        child = Child(kind, self.env(kind, metrics, **extra), log)
        self.children.append(child)
        return await child.start()

    async def restart(self, child: Child) -> Child:
        """A fresh process of the same kind with the same environment (new metrics port)."""
        env = dict(child.env)
        if child.metrics_port:
            env["INGEST_METRICS_PORT"] = str(free_port())
        self._n[child.kind] += 1
        fresh = Child(child.kind, env, self.tmp / f"{child.kind}-{self._n[child.kind]}.log")
        self.children.append(fresh)
        return await fresh.start()

    async def close(self) -> None:
        await asyncio.gather(*(c.stop(20) for c in self.children if c.alive))

    async def verify(
        self,
        temporal: Any,
        pool: asyncpg.Pool,
        expected: set[str],
        figures: Figures,
        *,
        tasks_per_run: int = 1,
        reduced_timeout: float = 300,
    ) -> Outcome:
        """:func:`verify` for this pipeline's task queue; the time limit follows the scale."""
        timeout = scaled(reduced_timeout, drain_seconds(len(expected), tasks_per_run))
        return await verify(
            temporal, pool, self.task_queue, expected, tasks_per_run, timeout, figures
        )

    async def committed_to_end(self, kind: str = "router", timeout: float = 60) -> None:
        """Wait until ingress (raw topic) or the router (events topic) committed everything."""
        group, topic = {
            "ingress": (self.ingress_group, self.topics.raw),
            "router": (self.router_group, self.topics.events),
        }[kind]
        await eventually(
            lambda: kafka.caught_up(self.ep.kafka, group, topic),
            timeout,
            f"the {kind} group {group} to commit to the end of {topic}",
        )

    def logs(self) -> str:
        return "\n".join(f"--- {c.logfile.name}\n{c.log(1500)}" for c in self.children)


# --- producing -------------------------------------------------------------------


@dataclass
class Produced:
    coords: list[tuple[int, int]] = field(default_factory=list)


async def produce_paced(
    bootstrap: str,
    topic: str,
    n: int,
    event_type: str,
    seconds: float,
    out: Produced,
    batch: int = 50,
    data: Callable[[int], dict[str, Any]] = lambda i: {"i": i},
) -> None:
    """Produce ``n`` id-less events spread over about ``seconds``; coordinates go to ``out``.

    ``data(i)`` is the ``data`` of the ``i``-th event."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        batches = max(1, (n + batch - 1) // batch)
        pause = seconds / batches
        for b in range(batches):
            lo, hi = b * batch, min(n, (b + 1) * batch)
            futs = [
                await producer.send(topic, orjson.dumps({"type": event_type, "data": data(i)}))
                for i in range(lo, hi)
            ]
            for f in futs:
                md = await f
                out.coords.append((md.partition, md.offset))
            await asyncio.sleep(pause)
    finally:
        await producer.stop()


def expected_workflow_ids(activity_ids: list[str], raw_topic: str, coords: Any) -> set[str]:
    return {
        ids.event_workflow_id(a, ids.source_event_id(raw_topic, p, o))
        for a in activity_ids
        for p, o in coords
    }


# --- the invariant ---------------------------------------------------------------


async def executions_by_id(temporal: Any, task_queue: str) -> Counter[str]:
    """Number of RunActivityWorkflow executions per workflow id on ``task_queue``."""
    query = f"TaskQueue = '{task_queue}' AND WorkflowType = 'RunActivityWorkflow'"
    return Counter([w.id async for w in temporal.list_workflows(query)])


@dataclass
class Outcome:
    """Everything :func:`verify` measured, before it asserts anything."""

    expected: int
    runs: int
    lost: int
    extra: int
    duplicate_runs: int
    not_succeeded: int
    bad_run_ids: int
    executions: int
    missing_executions: int
    extra_executions: int
    duplicate_executions: int
    tasks: int
    tasks_expected: int
    duplicate_tasks: int
    tasks_not_succeeded: int
    examples: dict[str, list[str]] = field(default_factory=dict)

    def figures(self) -> dict[str, Any]:
        """The columns of the figures table this outcome fills."""
        return {
            "lost": self.lost,
            "duplicate_runs": self.duplicate_runs + self.duplicate_executions,
            "runs": self.runs,
        }

    def check(self) -> None:
        ex = self.examples
        assert not self.lost, f"{self.lost} runs lost, e.g. {ex.get('lost')}"
        assert not self.extra, (
            f"{self.extra} unexpected runs (unstable ids?), e.g. {ex.get('extra')}"
        )
        assert not self.duplicate_runs, f"duplicate activity_runs rows: {ex.get('duplicate_runs')}"
        assert not self.not_succeeded, f"{self.not_succeeded} runs did not succeed"
        assert not self.bad_run_ids, f"{self.bad_run_ids} run ids not derived from the workflow id"
        assert not self.missing_executions, (
            f"{self.missing_executions} runs without a listed execution, e.g. {ex.get('missing')}"
        )
        assert not self.extra_executions, f"executions not started by us: {ex.get('extra_execs')}"
        assert not self.duplicate_executions, f"duplicate executions: {ex.get('dup_execs')}"
        assert not self.duplicate_tasks, f"{self.duplicate_tasks} duplicate task_instances ids"
        assert self.tasks == self.tasks_expected, (self.tasks, self.tasks_expected)
        assert not self.tasks_not_succeeded, f"{self.tasks_not_succeeded} tasks did not succeed"


async def measure(
    temporal: Any,
    pool: asyncpg.Pool,
    task_queue: str,
    expected: set[str],
    tasks_per_run: int = 1,
    timeout: float = 240,
) -> Outcome:
    """Wait (up to ``timeout``) for every expected run to finish, then count; asserts nothing."""

    async def finished() -> bool:
        n = await pool.fetchval("SELECT count(*) FROM activity_runs WHERE status = 'succeeded'")
        return int(n) >= len(expected)

    await wait_until(finished, timeout)

    async def counts() -> tuple[int, int]:
        runs = await pool.fetchval("SELECT count(*) FROM activity_runs")
        tasks = await pool.fetchval("SELECT count(*) FROM task_instances")
        return int(runs), int(tasks)

    # A stray duplicate (a redone start, a retried activity) would add a row late:
    # wait until the row counts stay unchanged for a quiet period.
    await quiet(counts, "the activity_runs/task_instances row counts", period=2.0, timeout=60)

    rows = await pool.fetch("SELECT workflow_id, run_id, status FROM activity_runs")
    per_id = Counter(r["workflow_id"] for r in rows)
    got = set(per_id)
    lost, extra = expected - got, got - expected
    dup_rows = {w: n for w, n in per_id.items() if n > 1}

    execs: Counter[str] = Counter()

    async def visible() -> bool:
        nonlocal execs
        execs = await executions_by_id(temporal, task_queue)
        return set(execs) >= expected

    await wait_until(visible, 60)  # visibility is eventually consistent
    dup_execs = {w: n for w, n in execs.items() if n > 1}

    tasks = await pool.fetch("SELECT id, status FROM task_instances")
    return Outcome(
        expected=len(expected),
        runs=len(rows),
        lost=len(lost),
        extra=len(extra),
        duplicate_runs=len(dup_rows),
        not_succeeded=sum(r["status"] != "succeeded" for r in rows),
        bad_run_ids=sum(r["run_id"] != ids.run_id_for(r["workflow_id"]) for r in rows),
        executions=sum(execs.values()),
        missing_executions=len(expected - set(execs)),
        extra_executions=len(set(execs) - expected),
        duplicate_executions=len(dup_execs),
        tasks=len(tasks),
        tasks_expected=tasks_per_run * len(expected),
        duplicate_tasks=len(tasks) - len({t["id"] for t in tasks}),
        tasks_not_succeeded=sum(t["status"] != "succeeded" for t in tasks),
        examples={
            "lost": sorted(lost)[:3],
            "extra": sorted(extra)[:3],
            "duplicate_runs": sorted(dup_rows)[:3],
            "missing": sorted(expected - set(execs))[:3],
            "extra_execs": sorted(set(execs) - expected)[:3],
            "dup_execs": sorted(dup_execs)[:3],
        },
    )


async def verify(
    temporal: Any,
    pool: asyncpg.Pool,
    task_queue: str,
    expected: set[str],
    tasks_per_run: int = 1,
    timeout: float = 240,
    figures: Figures | None = None,
) -> Outcome:
    """:func:`measure`, record the figures in ``figures``, then assert the invariant."""
    outcome = await measure(temporal, pool, task_queue, expected, tasks_per_run, timeout)
    if figures is not None:
        figures.update(**outcome.figures())
    outcome.check()
    return outcome


async def caught_up(bootstrap: str, group: str, topic: str) -> bool:
    return await kafka.caught_up(bootstrap, group, topic)


# --- one scenario's scaffolding ----------------------------------------------------


class Figures(dict[str, Any]):
    """One row of the figures table; appended to :data:`FIGURES` when created, so
    whatever was recorded before a failing assert is printed."""

    def __init__(self, title: str, t0: float) -> None:
        super().__init__(scenario=title, scale="full" if FULL else "reduced")
        self._t0 = t0
        FIGURES.append(self)

    def update(self, *args: Any, **figures: Any) -> None:  # type: ignore[override]
        super().update(*args, **figures)
        self["seconds"] = round(time.monotonic() - self._t0)


class Scenario:
    """What the ``fault`` fixture yields: pipelines, figures rows, and cleanups."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.t0 = time.monotonic()
        self.pipelines: list[Pipeline] = []
        self._cleanups: list[Callable[[], Awaitable[Any]]] = []

    def pipeline(self, ep: Endpoints, topics: Any, task_queue: str) -> Pipeline:
        pipe = Pipeline(self.tmp, ep, topics, task_queue)
        self.pipelines.append(pipe)
        return pipe

    def figures(self, title: str, **figures: Any) -> Figures:
        """A new row of the figures table, timed from now."""
        row = Figures(title, time.monotonic())
        row.update(**figures)
        return row

    def cleanup(self, fn: Callable[[], Awaitable[Any]]) -> None:
        """Run ``fn`` at the end, after the pipelines stopped (last registered, first run)."""
        self._cleanups.append(fn)

    def server_dir(self, name: str) -> Path:
        """A folder for a private server run as another user (PostgreSQL as
        ``embedded_postgres`` under root), removed at the end. Not under pytest's
        basetemp: every pytest session that starts resets ``/tmp/pytest-of-<user>`` to
        0700, which locks that user out of a running server's data (a CI run beside
        other test sessions failed so)."""
        import shutil
        import tempfile

        (ROOT / ".stack").mkdir(exist_ok=True)
        path = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=ROOT / ".stack"))

        async def remove() -> None:
            await asyncio.to_thread(shutil.rmtree, path, True)

        self.cleanup(remove)  # registered first: runs after the server's own stop
        return path

    async def private_postgres(self, database: str | None = None) -> tuple[Postgres, str]:
        """A private PostgreSQL (``devstack.postgres.Postgres``) on a free port, stopped at
        the end, and the URL of its migrated pipeline database: ``database``, created
        first, or the server's own. Unset ``DATABASE_URL`` first: ``Postgres.url`` uses it."""
        server = Postgres(StackSettings(dir=self.server_dir("pg"), pg_port=free_port()))
        await asyncio.to_thread(server.ensure)
        self.cleanup(lambda: asyncio.to_thread(server.stop))
        url = server.url
        if database is not None:
            conn = await asyncpg.connect(url)
            try:
                await conn.execute(f'CREATE DATABASE "{database}"')
            finally:
                await conn.close()
            url = f"{url.rpartition('/')[0]}/{database}"
        conn = await asyncpg.connect(url)
        try:
            await db.migrate(conn)
        finally:
            await conn.close()
        return server, url

    async def close(self) -> None:
        for pipe in self.pipelines:
            await pipe.close()
        while self._cleanups:
            await self._cleanups.pop()()

    def logs(self) -> str:
        return "\n".join(p.logs() for p in self.pipelines)
