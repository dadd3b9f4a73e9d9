"""What the two secured event-path tests share: the pipeline's processes on the secured
listeners, publishing and reading over them, and ``ingest replay``.

``tests/integration/secure/test_event_path_secured.py`` (Kafka and PostgreSQL secured)
and ``tests/integration/secure_temporal/test_event_path_all_secured.py`` (Temporal too)
differ only in the Temporal variables, the processes they add and what they check.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
from aiokafka import AIOKafkaConsumer

from pipeline import kafka
from pipeline.settings import KafkaSettings
from tests.integration.secure.conftest import SecureStack
from tests.support import ROOT
from tests.support.kafka import collect
from tests.support.process import clean_env

Procs = dict[str, asyncio.subprocess.Process]


async def publish(cfg: KafkaSettings, topic: str, value: bytes) -> None:
    producer = kafka.producer(cfg)
    await producer.start()
    try:
        await producer.send_and_wait(topic, value)
    finally:
        await producer.stop()


async def read_committed(cfg: KafkaSettings, topic: str, expect: int) -> list[Any]:
    """What a ``read_committed`` reader sees of ``topic``: up to 60 s for ``expect``
    records, then one idle fetch more (a record beyond them shows too)."""
    consumer: AIOKafkaConsumer = kafka.consumer(
        cfg, topic, group_id=f"reader-{uuid.uuid4()}", isolation_level="read_committed"
    )
    return await collect(consumer, expect, 60)


def pipeline_specs(
    stack: SecureStack, common: dict[str, str], tag: str, instance: str
) -> dict[str, dict[str, str]]:
    """The environments of ingress (SCRAM), router (OAUTHBEARER), worker and relay (mTLS):
    ``common`` (topics, Temporal, ``DATABASE_URL``) plus each one's listener."""
    return {
        "ingress": clean_env(
            **common, **stack.kafka_env("SCRAM"), INGEST_INGRESS_GROUP=f"ing-{tag}"
        ),
        "router": clean_env(**common, **stack.kafka_env("OAUTH"), INGEST_ROUTER_GROUP=f"rt-{tag}"),
        "worker": clean_env(**common, **stack.kafka_env("MTLS")),
        "relay": clean_env(
            **common,
            **stack.kafka_env("MTLS"),
            INGEST_RELAY_INSTANCE=instance,
            INGEST_RELAY_PROGRESS_TOPIC=f"progress-{instance}",
            INGEST_RELAY_POLL_INTERVAL_MS="50",
        ),
    }


@contextlib.asynccontextmanager
async def processes(specs: dict[str, dict[str, str]], logs: Path) -> AsyncIterator[Procs]:
    """``ingest KIND`` for each KIND -> environment; SIGTERM at the end, each must exit 0."""
    procs = {}
    for kind, env in specs.items():
        out = (logs / f"{kind}.log").open("ab")
        procs[kind] = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "app.cli", kind, cwd=ROOT, env=env, stdout=out, stderr=out
        )
    try:
        yield procs
    finally:
        for p in procs.values():
            if p.returncode is None:
                p.send_signal(signal.SIGTERM)
        codes = {k: await asyncio.wait_for(p.wait(), 60) for k, p in procs.items()}
    assert codes == {k: 0 for k in procs}, (codes, tails(logs))


def tails(logs: Path) -> str:
    return "\n".join(
        f"--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-15:])
        for p in sorted(logs.glob("*.log"))
    )


async def succeeded(pool: asyncpg.Pool, procs: Procs, logs: Path, n: int) -> bool:
    """``n`` runs logged succeeded; fails at once when a process exited."""
    dead = [k for k, p in procs.items() if p.returncode is not None]
    assert not dead, f"{dead} exited\n{tails(logs)}"
    done = await pool.fetchval("SELECT count(*) FROM activity_runs WHERE status = 'succeeded'")
    return int(done) == n


async def replay(env: dict[str, str]) -> dict[str, Any]:
    """``ingest replay --from-offset 0 --json`` with ``env``: its report (it must exit 0)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.cli", "replay", "--from-offset", "0", "--json",
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    stdout, stderr = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, stderr.decode()[-2000:]
    report: dict[str, Any] = json.loads(stdout.decode().strip().splitlines()[-1])
    return report
