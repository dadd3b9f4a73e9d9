"""Scenario 10: unreachable dependencies at start-up, and secrets never logged.

Each process exits non-zero within a bounded time with a message naming the setting
to fix. Then the same with secrets set to marker strings: the markers never appear
in stdout or stderr.
"""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

from tests.support import ROOT
from tests.support.process import clean_env

BOUND = 45  # seconds a process may take to give up

DB_MARKER = "dbSECRETmarker7f3a"
API_MARKER = "apiKEYmarker91bc"
SASL_MARKER = "saslPASSmarker55d2"


async def _run(kind: str, env: dict[str, str]) -> tuple[int, str, float]:
    t0 = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app.cli",
        kind,
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), BOUND + 15)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"{kind} still running after {BOUND + 15}s") from None
    return int(proc.returncode or 0), (out + err).decode(errors="replace"), time.monotonic() - t0


def _base(stack, **extra: str) -> dict[str, str]:
    env = clean_env(
        **{
            "KAFKA_BOOTSTRAP_SERVERS": stack.kafka,
            "TEMPORAL_ADDRESS": stack.temporal,
            "DATABASE_URL": stack.admin_db_url,
            "INGEST_METRICS_PORT": "0",
            "TEMPORAL_TASK_QUEUE": "tq-faults-bad-config",
            "KAFKA_RAW_TOPIC": "faults-bad-config-raw",
            "KAFKA_EVENTS_TOPIC": "faults-bad-config-events",
            "KAFKA_DLQ_TOPIC": "faults-bad-config-dlq",
            "INGEST_ROUTER_GROUP": "faults-bad-config",
            "INGEST_INGRESS_GROUP": "faults-bad-config",
        }
    )
    env.update(extra)
    return env


BAD_KAFKA = {"KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"}
BAD_TEMPORAL = {"TEMPORAL_ADDRESS": "127.0.0.1:1"}
BAD_DB = {"DATABASE_URL": "postgresql://app@127.0.0.1:1/nowhere"}
# A namespace the server does not know: refused at start-up, not by dead-lettering
# every event later (pipeline.clients._check_namespace).
BAD_NAMESPACE = {"TEMPORAL_NAMESPACE": "no-such-namespace"}

CASES = [
    ("ingress", BAD_KAFKA, "KAFKA_BOOTSTRAP_SERVERS"),
    ("router", BAD_KAFKA, "KAFKA_BOOTSTRAP_SERVERS"),
    ("router", BAD_TEMPORAL, "TEMPORAL_ADDRESS"),
    ("router", BAD_DB, "DATABASE_URL"),
    ("router", BAD_NAMESPACE, "TEMPORAL_NAMESPACE=no-such-namespace"),
    ("worker", BAD_TEMPORAL, "TEMPORAL_ADDRESS"),
    ("worker", BAD_NAMESPACE, "TEMPORAL_NAMESPACE=no-such-namespace"),
    ("worker", BAD_DB, "DATABASE_URL"),
]


@pytest.mark.timeout(180)
async def test_unreachable_dependency_names_the_setting(stack):
    results = await asyncio.gather(*(_run(kind, _base(stack, **bad)) for kind, bad, _ in CASES))
    for (kind, bad, setting), (code, out, took) in zip(CASES, results, strict=True):
        what = f"{kind} with {bad}"
        assert code != 0, f"{what}: exit 0\n{out[-2000:]}"
        assert setting in out, f"{what}: the output does not name {setting}\n{out[-2000:]}"
        assert took < BOUND, f"{what}: took {took:.0f}s"
        assert "Traceback" not in out, f"{what}: a traceback instead of a message\n{out[-3000:]}"


SECRET_ENV = {
    "DATABASE_URL": f"postgresql://app:{DB_MARKER}@127.0.0.1:1/nowhere",
    "TEMPORAL_API_KEY": API_MARKER,
    "KAFKA_SASL_PASSWORD": SASL_MARKER,
    "KAFKA_SASL_USERNAME": "app",
    "INGEST_LOG_LEVEL": "DEBUG",
}

SECRET_CASES = [
    ("ingress", BAD_KAFKA),
    ("router", BAD_KAFKA),
    ("router", BAD_TEMPORAL),
    ("router", {}),  # Kafka and Temporal answer (the API key forces TLS, so Temporal fails)
    ("worker", BAD_TEMPORAL),
    ("worker", {}),
]


@pytest.mark.timeout(180)
async def test_secrets_are_never_printed(stack, fault):
    figures = fault.figures(
        "10 bad configuration", events=0, kills=0, lost=0, duplicate_runs=0, dlq=0, dlq_expected=0
    )
    results = await asyncio.gather(
        *(_run(kind, _base(stack, **SECRET_ENV, **bad)) for kind, bad in SECRET_CASES)
    )
    figures.update(restarts=len(CASES) + len(SECRET_CASES))
    for (kind, bad), (code, out, took) in zip(SECRET_CASES, results, strict=True):
        what = f"{kind} with {bad or 'the shared Kafka/Temporal'}"
        assert code != 0, f"{what}: exit 0\n{out[-2000:]}"
        assert took < BOUND, f"{what}: took {took:.0f}s"
        for marker in (DB_MARKER, API_MARKER, SASL_MARKER):
            assert marker not in out, f"{what}: secret {marker} printed:\n{out[-3000:]}"
