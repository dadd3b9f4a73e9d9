"""The event path end to end with all three servers secured, with the real processes.

As tests/integration/secure/test_event_path_secured.py (Kafka's SASL_SSL SCRAM-SHA-512,
mTLS and SASL_SSL OAUTHBEARER listeners; ``DATABASE_URL`` with ``sslmode=verify-full``
on the TLS-only PostgreSQL), but Temporal is a secured private real server too: TLS,
a client certificate required, and a JWT as ``TEMPORAL_API_KEY`` (``conftest.
secure_server``). ``ingest ingress``, ``router``, ``worker``, ``relay`` and ``ops`` get
nothing but those variables: the run is logged succeeded, its ``emit`` record comes out
through the relay to a ``read_committed`` reader, the ops API (``INGEST_OPS_TOKEN``)
shows the run with its workflow's status as the secured server reports it and answers
401 without the token, its DLQ peek reads the (empty) DLQ topic over SCRAM, ``ingest
replay`` starts nothing again, and each process exits 0 on SIGTERM.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from functools import partial
from pathlib import Path

import httpx
import pytest
from devstack import temporal_secure
from devstack.temporal_server import TemporalServer

from pipeline import db
from pipeline.clients import ensure_topics, temporal_client
from tests.integration.secure import event_path as ep
from tests.integration.secure.conftest import SecureStack
from tests.support import ROOT, wait
from tests.support import db as seed
from tests.support.net import free_port
from tests.support.process import clean_env
from tests.support.temporal_server import secured_settings

pytestmark = [pytest.mark.server_only, pytest.mark.temporal_server]


async def _ops_ready(base: str, proc: asyncio.subprocess.Process, logs: Path) -> None:
    async with asyncio.timeout(60), httpx.AsyncClient(base_url=base, timeout=5) as http:
        while True:
            assert proc.returncode is None, f"ops exited {proc.returncode}\n{ep.tails(logs)}"
            try:
                if (await http.get("/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)


async def test_event_path_with_kafka_postgres_and_temporal_secured(
    secure_stack: SecureStack, secure_db: str, secure_server: TemporalServer, tmp_path: Path
) -> None:
    t0 = time.monotonic()
    tag = uuid.uuid4().hex[:8]
    raw, events, dlq, out = (f"{t}-allsec-{tag}" for t in ("raw", "events", "dlq", "out"))
    scram = secure_stack.kafka("SCRAM")
    await ensure_topics(scram, [raw, events, dlq, out], 2)

    tcfg = secure_server.cfg
    temporal_env = temporal_secure.client_env(
        tcfg, api_key=temporal_secure.token(tcfg, ["default:write"])
    )
    assert set(temporal_env) >= {
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
        "TEMPORAL_TLS_CLIENT_CERT_PATH",
        "TEMPORAL_TLS_CLIENT_KEY_PATH",
        "TEMPORAL_API_KEY",
    }
    token = "ops-" + uuid.uuid4().hex + uuid.uuid4().hex  # 68 characters
    ops_port = free_port()
    base = f"http://127.0.0.1:{ops_port}"

    pool = await db.create_pool(secure_db, 1, 2)
    try:
        etype = f"order.allsecured.{tag}"
        emit = {"type": "emit", "config": {"topic": out}, "idempotency_key": "x:{data.order_id}"}
        await seed.seed_activity(pool, etype, tasks=[emit])
        await ep.publish(scram, raw, seed.event(etype, f"allsec-{tag}", order_id=f"a-{tag}"))

        common = {
            "KAFKA_RAW_TOPIC": raw,
            "KAFKA_EVENTS_TOPIC": events,
            "KAFKA_DLQ_TOPIC": dlq,
            **temporal_env,
            "TEMPORAL_TASK_QUEUE": f"tq-allsec-{tag}",
            "DATABASE_URL": secure_db,
            "INGEST_METRICS_PORT": "0",
            "PYTHONPATH": str(ROOT),
        }
        specs = ep.pipeline_specs(secure_stack, common, tag, f"allsec-{tag}")
        specs["ops"] = clean_env(
            **common,
            **secure_stack.kafka_env("SCRAM"),
            INGEST_OPS_TOKEN=token,
            INGEST_OPS_PORT=str(ops_port),
        )
        async with ep.processes(specs, tmp_path) as procs:
            one = partial(ep.succeeded, pool, procs, tmp_path, 1)
            await wait.eventually(one, 90, "the run to succeed")
            emitted = await ep.read_committed(secure_stack.kafka("OAUTH"), out, 1)

            run = await pool.fetchrow("SELECT run_id, workflow_id, event_id FROM activity_runs")
            assert run is not None and run["event_id"] == f"allsec-{tag}"
            run_id = str(run["run_id"])
            await _ops_ready(base, procs["ops"], tmp_path)
            async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                anonymous = await http.get("/api/runs")
                assert anonymous.status_code == 401, anonymous.text
                auth = {"Authorization": f"Bearer {token}"}
                listed = await http.get("/api/runs", headers=auth)
                assert listed.status_code == 200, listed.text
                assert [(r["run_id"], r["status"]) for r in listed.json()["runs"]] == [
                    (run_id, "succeeded")
                ]
                # The detail asks the secured Temporal server for the workflow's status.
                detail = await http.get(f"/api/runs/{run_id}", headers=auth)
                assert detail.status_code == 200, detail.text
                assert detail.json()["temporal_status"] == "COMPLETED", detail.json()
                assert (await http.get(f"/api/runs/{run_id}")).status_code == 401
                # The DLQ peek reads the DLQ topic through the SCRAM listener: nothing there.
                peek = await http.get("/api/dlq", headers=auth)
                assert peek.status_code == 200, peek.text
                assert (peek.json()["topic"], peek.json()["scanned"]) == (dlq, 0), peek.json()

        # The workflow ran on the secured server (the only Temporal the processes knew).
        client = await temporal_client(secured_settings(secure_server))
        described = await client.get_workflow_handle(run["workflow_id"]).describe()
        assert described.status is not None and described.status.name == "COMPLETED"

        emit_ids = [
            r["id"]
            for r in await pool.fetch("SELECT id FROM task_instances WHERE task_type = 'emit'")
        ]
        assert len(emit_ids) == 1
        assert [m.key.decode() for m in emitted] == emit_ids

        # `ingest replay` over SASL_SSL and the secured Temporal: it starts nothing again.
        report = await ep.replay(clean_env(**common, **secure_stack.kafka_env("SCRAM")))
        assert (report["read"], report["started"]) == (1, 0), report
        assert await pool.fetchval("SELECT count(*) FROM activity_runs") == 1
    finally:
        await pool.close()
    print(f"event path, all three servers secured: {time.monotonic() - t0:.1f}s")
