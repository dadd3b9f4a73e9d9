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

import time
import uuid
from functools import partial
from pathlib import Path

import asyncpg

from pipeline import db
from pipeline.clients import ensure_topics
from tests.integration.secure import event_path as ep
from tests.integration.secure.conftest import SecureStack
from tests.support import ROOT, wait
from tests.support import db as seed
from tests.support.process import clean_env


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
        await ep.publish(scram, raw, seed.event(etype, f"scram-{tag}", order_id=f"s-{tag}"))
        await ep.publish(mtls, raw, seed.event(etype, f"mtls-{tag}", order_id=f"m-{tag}"))

        topics = {"KAFKA_RAW_TOPIC": raw, "KAFKA_EVENTS_TOPIC": events, "KAFKA_DLQ_TOPIC": dlq}
        common = {
            **topics,
            "TEMPORAL_ADDRESS": secure_stack.plain.temporal,
            "TEMPORAL_TASK_QUEUE": task_queue,
            "DATABASE_URL": secure_db,
            "INGEST_METRICS_PORT": "0",
            "PYTHONPATH": str(ROOT),
        }
        specs = ep.pipeline_specs(secure_stack, common, tag, f"sec-{tag}")
        async with ep.processes(specs, tmp_path) as procs:
            both = partial(ep.succeeded, pool, procs, tmp_path, 2)
            await wait.eventually(both, 120, "both runs to succeed")
            emitted = await ep.read_committed(secure_stack.kafka("OAUTH"), out, 2)

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
        assert sorted(m.key.decode() for m in emitted) == sorted(emit_ids)

        # `ingest replay` over SASL_SSL: it reads the events topic and starts nothing again.
        report = await ep.replay(clean_env(**common, **secure_stack.kafka_env("SCRAM")))
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
