"""Bad credentials against the secured servers: refused at start-up, naming the setting.

Each case runs the real ``ingest router`` (it connects to Kafka, Temporal and
PostgreSQL before it consumes anything) with one thing wrong, and expects a non-zero
exit within a bound, a last line that names the setting to fix, no traceback, and
nothing committed: the router's consumer group has no offset and no run was logged,
although an event waits on its topic.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
import uuid
from pathlib import Path

import asyncpg
from devstack import secure
from devstack.certs import Pki

from pipeline.clients import ensure_topics
from pipeline.settings import KafkaSettings
from tests.integration.secure.conftest import SecureStack
from tests.support import ROOT
from tests.support import db as seed
from tests.support import kafka as plain_kafka
from tests.support.process import clean_env, spawn_router

BOUND = 30  # seconds a refused process may take


async def _run_router(env: dict[str, str]) -> tuple[int, str, float]:
    t0 = time.monotonic()
    proc = await spawn_router(env)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), BOUND + 15)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return -1, f"still running after {BOUND + 15}s", time.monotonic() - t0
    return int(proc.returncode or 0), out.decode(errors="replace"), time.monotonic() - t0


def _cases(s: SecureStack, tmp: Path) -> list[tuple[str, dict[str, str], tuple[str, ...]]]:
    """(what, the env of the router's connections, settings one of which the line names)."""
    scram, mtls = s.kafka_env("SCRAM"), s.kafka_env("MTLS")
    other_ca = str(Pki(tmp / "other-pki", "another CA").ca_cert)
    now = dt.datetime.now(dt.UTC)
    expired = secure.pki(s.cfg).issue(
        "expired-client", (), days=1, not_before=now - dt.timedelta(days=10), client=True
    )
    good_db = s.db_url("ingest")
    no_pw = good_db.replace(f":{secure.pg_password(s.cfg)}@", ":not-the-password@")
    assert no_pw != good_db
    sasl = ("KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD")
    return [
        ("wrong SCRAM password", {**scram, "KAFKA_SASL_PASSWORD": "not-the-password"}, sasl),
        (
            "unknown SCRAM user",
            {**scram, "KAFKA_SASL_USERNAME": f"nobody-{uuid.uuid4().hex[:6]}"},
            sasl,
        ),
        ("Kafka: another CA", {**scram, "KAFKA_SSL_CAFILE": other_ca}, ("KAFKA_SSL_CAFILE",)),
        (
            "mTLS: an expired client certificate",
            {
                **mtls,
                "KAFKA_SSL_CERTFILE": str(expired.cert),
                "KAFKA_SSL_KEYFILE": str(expired.key),
            },
            ("KAFKA_SSL_CERTFILE",),
        ),
        (
            "a plaintext client on the SCRAM listener",
            {"KAFKA_BOOTSTRAP_SERVERS": scram["KAFKA_BOOTSTRAP_SERVERS"]},
            ("KAFKA_SECURITY_PROTOCOL",),
        ),
        (
            "PostgreSQL verify-full: another CA",
            {**scram, "DATABASE_URL": good_db.replace(str(secure.pki(s.cfg).ca_cert), other_ca)},
            ("DATABASE_URL",),
        ),
        ("PostgreSQL: a wrong password", {**scram, "DATABASE_URL": no_pw}, ("DATABASE_URL",)),
    ]


async def test_bad_credentials_are_refused_naming_the_setting(
    secure_stack: SecureStack, secure_db: str, task_queue: str, tmp_path: Path
) -> None:
    t0 = time.monotonic()
    tag = uuid.uuid4().hex[:8]
    events, dlq = f"events-ref-{tag}", f"dlq-ref-{tag}"
    plain = KafkaSettings(bootstrap_servers=secure_stack.plain.kafka)
    await ensure_topics(plain, [events, dlq], 1)
    pool = await asyncpg.create_pool(secure_db, min_size=1, max_size=1)
    try:
        etype = f"order.refused.{tag}"
        await seed.seed_activity(pool, etype, tasks=[{"type": "noop"}])
        await plain_kafka.produce(
            plain.bootstrap_servers, events, [(None, seed.event(etype, f"e-{tag}"), [])]
        )

        cases = _cases(secure_stack, tmp_path)
        envs = [
            clean_env(
                **{
                    "DATABASE_URL": secure_db,
                    "TEMPORAL_ADDRESS": secure_stack.plain.temporal,
                    "TEMPORAL_TASK_QUEUE": task_queue,
                    "KAFKA_EVENTS_TOPIC": events,
                    "KAFKA_DLQ_TOPIC": dlq,
                    "INGEST_METRICS_PORT": "0",
                    "INGEST_ROUTER_GROUP": f"ref-{tag}-{i}",
                    "PYTHONPATH": str(ROOT),
                    **env,
                }
            )
            for i, (_, env, _) in enumerate(cases)
        ]
        results = await asyncio.gather(*(_run_router(env) for env in envs))

        failures = []
        for (what, _, names), (code, out, took) in zip(cases, results, strict=True):
            lines = [ln for ln in out.splitlines() if ln.strip()]
            last = lines[-1] if lines else ""
            problems = []
            if code == 0:
                problems.append("exit 0")
            if not any(n in last for n in names):
                problems.append(f"the last line names none of {names}")
            if "Traceback" in out:
                problems.append("a traceback")
            if took > BOUND:
                problems.append(f"took {took:.0f}s")
            if problems:
                failures.append(f"{what}: {', '.join(problems)}; exit {code}; last line: {last}")

        # Nothing committed: no router group has an offset, no run was logged.
        for i in range(len(cases)):
            offsets = await plain_kafka.committed(plain.bootstrap_servers, f"ref-{tag}-{i}", events)
            assert set(offsets.values()) == {None}, (cases[i][0], offsets)
        assert await pool.fetchval("SELECT count(*) FROM activity_runs") == 0
    finally:
        await pool.close()
    assert not failures, "\n".join(failures)
    print(f"secured refusals: {len(cases)} cases in {time.monotonic() - t0:.1f}s")
