"""The event path end to end on the secured servers, with the real processes.

Two events go in, one through SASL_SSL SCRAM-SHA-512 and one through mTLS. Then
``ingest ingress`` (SCRAM), ``ingest router`` (SASL_SSL OAUTHBEARER, the pipeline's
unsecured JWT provider), ``ingest worker`` and ``ingest relay`` (mTLS) run with nothing
but ``KAFKA_*`` variables pointing at the secured listeners and a ``DATABASE_URL`` with
``sslmode=verify-full`` on the TLS-only PostgreSQL (Temporal: the plain dev server).
Each event's run is logged, its ``emit`` task's record comes out through the relay to a
``read_committed`` reader on the OAUTHBEARER listener, and ``ingest replay`` over SCRAM
starts nothing again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
from aiokafka import AIOKafkaConsumer

from pipeline import db, kafka
from pipeline.clients import ensure_topics
from pipeline.settings import KafkaSettings
from tests.integration.secure.conftest import SecureStack
from tests.support import ROOT, wait
from tests.support import db as seed
from tests.support.process import clean_env


async def _publish(cfg: KafkaSettings, topic: str, value: bytes) -> None:
    producer = kafka.producer(cfg)
    await producer.start()
    try:
        await producer.send_and_wait(topic, value)
    finally:
        await producer.stop()


async def _read_committed(cfg: KafkaSettings, topic: str, expect: int) -> list[object]:
    consumer: AIOKafkaConsumer = kafka.consumer(
        cfg, topic, group_id=f"reader-{uuid.uuid4()}", isolation_level="read_committed"
    )
    await consumer.start()
    got: list[object] = []
    try:
        deadline = time.monotonic() + 60
        while len(got) < expect and time.monotonic() < deadline:
            for msgs in (await consumer.getmany(timeout_ms=500)).values():
                got.extend(msgs)
        for msgs in (await consumer.getmany(timeout_ms=1000)).values():
            got.extend(msgs)  # one idle fetch more: a record beyond them shows too
    finally:
        await consumer.stop()
    return got


@contextlib.asynccontextmanager
async def _processes(
    specs: dict[str, dict[str, str]], logs: Path
) -> AsyncIterator[dict[str, asyncio.subprocess.Process]]:
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
    assert codes == {k: 0 for k in procs}, (codes, _tails(logs))


def _tails(logs: Path) -> str:
    return "\n".join(
        f"--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-15:])
        for p in sorted(logs.glob("*.log"))
    )


async def test_event_path_on_secured_servers(
    secure_stack: SecureStack, secure_db: str, task_queue: str, tmp_path: Path
) -> None:
    t0 = time.monotonic()
    tag = uuid.uuid4().hex[:8]
    raw, events, dlq, out = (f"{t}-sec-{tag}" for t in ("raw", "events", "dlq", "out"))
    scram, mtls = secure_stack.kafka("SCRAM"), secure_stack.kafka("MTLS")
    # Admin calls over SASL_SSL too: the topics are created through the SCRAM listener.
    await ensure_topics(scram, [raw, events, dlq, out], 2)

    pool = await db.create_pool(secure_db, 1, 2)
    try:
        etype = f"order.secured.{tag}"
        emit = {"type": "emit", "config": {"topic": out}, "idempotency_key": "x:{data.order_id}"}
        await seed.seed_activity(pool, etype, tasks=[emit])
        await _publish(scram, raw, seed.event(etype, f"scram-{tag}", order_id=f"s-{tag}"))
        await _publish(mtls, raw, seed.event(etype, f"mtls-{tag}", order_id=f"m-{tag}"))

        topics = {"KAFKA_RAW_TOPIC": raw, "KAFKA_EVENTS_TOPIC": events, "KAFKA_DLQ_TOPIC": dlq}
        common = {
            **topics,
            "TEMPORAL_ADDRESS": secure_stack.plain.temporal,
            "TEMPORAL_TASK_QUEUE": task_queue,
            "DATABASE_URL": secure_db,
            "INGEST_METRICS_PORT": "0",
            "PYTHONPATH": str(ROOT),
        }
        instance = f"sec-{tag}"
        specs = {
            "ingress": clean_env(
                **common, **secure_stack.kafka_env("SCRAM"), INGEST_INGRESS_GROUP=f"ing-{tag}"
            ),
            "router": clean_env(
                **common, **secure_stack.kafka_env("OAUTH"), INGEST_ROUTER_GROUP=f"rt-{tag}"
            ),
            "worker": clean_env(**common, **secure_stack.kafka_env("MTLS")),
            "relay": clean_env(
                **common,
                **secure_stack.kafka_env("MTLS"),
                INGEST_RELAY_INSTANCE=instance,
                INGEST_RELAY_PROGRESS_TOPIC=f"progress-{instance}",
                INGEST_RELAY_POLL_INTERVAL_MS="50",
            ),
        }
        async with _processes(specs, tmp_path) as procs:

            async def both_runs_succeeded() -> bool:
                dead = [k for k, p in procs.items() if p.returncode is not None]
                assert not dead, f"{dead} exited\n{_tails(tmp_path)}"
                n = await pool.fetchval(
                    "SELECT count(*) FROM activity_runs WHERE status = 'succeeded'"
                )
                return n == 2

            await wait.eventually(both_runs_succeeded, 120, "both runs to succeed")
            emitted = await _read_committed(secure_stack.kafka("OAUTH"), out, 2)

        runs = await pool.fetch("SELECT event_id, status FROM activity_runs ORDER BY event_id")
        assert [(r["event_id"], r["status"]) for r in runs] == [
            (f"mtls-{tag}", "succeeded"),
            (f"scram-{tag}", "succeeded"),
        ]
        emit_ids = {
            r["id"]
            for r in await pool.fetch("SELECT id FROM task_instances WHERE task_type = 'emit'")
        }
        assert len(emit_ids) == 2
        assert sorted(m.key.decode() for m in emitted) == sorted(emit_ids)  # type: ignore[attr-defined]

        # `ingest replay` over SASL_SSL: it reads the events topic and starts nothing again.
        replay = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "app.cli",
            "replay",
            "--from-offset",
            "0",
            "--json",
            cwd=ROOT,
            env=clean_env(**common, **secure_stack.kafka_env("SCRAM")),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await asyncio.wait_for(replay.communicate(), 120)
        assert replay.returncode == 0, stderr.decode()[-2000:]
        report = json.loads(stdout.decode().strip().splitlines()[-1])
        assert (report["read"], report["started"]) == (2, 0), report
        assert await pool.fetchval("SELECT count(*) FROM activity_runs") == 2
    finally:
        await pool.close()
    print(
        f"secured stack: up --secure {secure_stack.up_seconds:.1f}s (this session), "
        f"event path {time.monotonic() - t0:.1f}s"
    )


async def test_tls_postgres_refuses_plaintext(secure_stack: SecureStack) -> None:
    """pg_hba has hostssl lines only: a client without TLS is turned away by the server
    itself (not merely by the client's sslmode)."""
    url = secure_stack.db_url("ingest").split("?", 1)[0] + "?sslmode=disable"
    try:
        conn = await asyncpg.connect(url, timeout=10)
    except asyncpg.InvalidAuthorizationSpecificationError as exc:
        assert "no encryption" in str(exc), exc
    else:
        await conn.close()
        raise AssertionError("the TLS PostgreSQL accepted a plaintext connection")
