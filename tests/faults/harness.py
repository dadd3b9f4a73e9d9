"""Fault-injection harness: real pipeline subprocesses, paced producers, the invariant.

The invariant every scenario checks (:func:`verify`): every unique (activity,
trigger) has exactly one ``activity_runs`` row and exactly one
``RunActivityWorkflow`` execution, nothing is lost, nothing extra exists (an
unstable event id would show up as an extra workflow id), and every planned task
has exactly one ``task_instances`` row.

Size: ``FAULTS_SCALE=full`` (``make faults``) runs the full version; anything
else runs the reduced version CI can afford.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import orjson
from aiokafka import AIOKafkaProducer

from schemas import ids
from tests import helpers
from tests.conftest import ROOT

FULL = os.environ.get("FAULTS_SCALE", "").lower() == "full"

# One row per scenario run; printed by tests/faults/conftest.py (FAULTS_SCALE=full).
FIGURES: list[dict[str, Any]] = []


def scaled(reduced: Any, full: Any) -> Any:
    return full if FULL else reduced


# Completed task-runs per second the local stack sustains end to end while a
# scenario kills or stops things: measured ~4 on 2 cores; 2.5 leaves headroom.
# A full-size run of 10,000 events is therefore about an hour per scenario.
DRAIN_RATE = 2.5


def drain_seconds(runs: int, tasks_per_run: int = 1) -> int:
    """How long full-size verification may wait for ``runs`` to finish."""
    return int(runs * tasks_per_run / DRAIN_RATE) + 600


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def record(scenario: str, **figures: Any) -> None:
    FIGURES.append({"scenario": scenario, "scale": "full" if FULL else "reduced", **figures})


# --- processes -------------------------------------------------------------------


@dataclass
class Endpoints:
    kafka: str
    temporal: str
    database_url: str


class Child:
    """One ``python -m pipeline.cli <kind>`` process; output goes to a log file."""

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
                "pipeline.cli",
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

    async def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of ``name`` matching ``labels`` on this process's /metrics."""
        import httpx

        async with httpx.AsyncClient() as http:
            text = (await http.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5)).text
        total = 0.0
        for line in text.splitlines():
            if line.startswith(f"{name}{{") and all(
                f'{k}="{v}"' in line for k, v in labels.items()
            ):
                total += float(line.rsplit(" ", 1)[1])
        return total

    async def ready(self) -> bool:
        import httpx

        try:
            async with httpx.AsyncClient() as http:
                r = await http.get(f"http://127.0.0.1:{self.metrics_port}/healthz", timeout=2)
                return r.status_code == 200
        except httpx.HTTPError:
            return False


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
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("KAFKA_", "TEMPORAL_", "INGEST_")) and k != "DATABASE_URL"
        }
        env.update(
            {
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
) -> None:
    """Produce ``n`` id-less events spread over about ``seconds``; coordinates go to ``out``."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        batches = max(1, (n + batch - 1) // batch)
        pause = seconds / batches
        for b in range(batches):
            lo, hi = b * batch, min(n, (b + 1) * batch)
            futs = [
                await producer.send(topic, orjson.dumps({"type": event_type, "data": {"i": i}}))
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
    expected: int
    runs: int
    lost: int
    extra: int
    duplicate_runs: int
    executions: int
    duplicate_executions: int
    tasks: int


async def verify(
    temporal: Any,
    pool: asyncpg.Pool,
    task_queue: str,
    expected: set[str],
    tasks_per_run: int = 1,
    timeout: float = 240,
    what: str = "",
) -> Outcome:
    """Wait for every expected run to finish, then assert the invariant."""

    async def finished() -> bool:
        n = await pool.fetchval("SELECT count(*) FROM activity_runs WHERE status = 'succeeded'")
        return int(n) >= len(expected)

    await helpers.eventually(finished, timeout, f"{len(expected)} runs to succeed {what}")
    await asyncio.sleep(2)  # let a stray duplicate surface

    rows = await pool.fetch("SELECT workflow_id, run_id, status FROM activity_runs")
    per_id = Counter(r["workflow_id"] for r in rows)
    got = set(per_id)
    lost = expected - got
    extra = got - expected
    dup_rows = {w: n for w, n in per_id.items() if n > 1}
    assert not lost, f"{len(lost)} runs lost, e.g. {sorted(lost)[:3]}"
    assert not extra, f"{len(extra)} unexpected runs (unstable ids?), e.g. {sorted(extra)[:3]}"
    assert not dup_rows, f"duplicate activity_runs rows: {list(dup_rows.items())[:3]}"
    assert {r["status"] for r in rows} == {"succeeded"}
    assert all(r["run_id"] == ids.run_id_for(r["workflow_id"]) for r in rows)

    execs: Counter[str] = Counter()

    async def visible() -> bool:
        nonlocal execs
        execs = await executions_by_id(temporal, task_queue)
        return set(execs) >= expected

    await helpers.eventually(visible, 60, "Temporal visibility to list every execution")
    dup_execs = {w: n for w, n in execs.items() if n > 1}
    assert set(execs) == expected, f"executions not started by us: {set(execs) - expected}"
    assert not dup_execs, f"duplicate executions: {list(dup_execs.items())[:3]}"

    tasks = await pool.fetch("SELECT id, status FROM task_instances")
    assert len({t["id"] for t in tasks}) == len(tasks)
    assert len(tasks) == tasks_per_run * len(expected), (len(tasks), len(expected))
    assert {t["status"] for t in tasks} == {"succeeded"}
    return Outcome(
        expected=len(expected),
        runs=len(rows),
        lost=len(lost),
        extra=len(extra),
        duplicate_runs=len(dup_rows),
        executions=sum(execs.values()),
        duplicate_executions=len(dup_execs),
        tasks=len(tasks),
    )


async def caught_up(bootstrap: str, group: str, topic: str) -> bool:
    end = await helpers.end_offsets(bootstrap, topic)
    got = await helpers.committed(bootstrap, group, topic)
    return all((got.get(p) or 0) >= off for p, off in end.items())
