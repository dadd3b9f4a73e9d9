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
    # A SASL protocol, so that the password reaches the client (without one it is refused
    # at load, never used). PLAIN would send it as is; the plaintext broker refuses the
    # SASL handshake first.
    "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
    "KAFKA_SASL_MECHANISM": "PLAIN",
    "KAFKA_SASL_PASSWORD": SASL_MARKER,
    "KAFKA_SASL_USERNAME": "app",
    "INGEST_LOG_LEVEL": "DEBUG",
}

SECRET_CASES = [
    ("ingress", BAD_KAFKA),
    ("router", BAD_KAFKA),
    ("router", BAD_TEMPORAL),
    ("router", {}),  # the shared Kafka refuses the SASL handshake on its plaintext listener
    ("worker", BAD_TEMPORAL),
    ("worker", {}),  # Temporal answers (the API key forces TLS, so Temporal fails)
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


# Misconfigurations refused when the settings load, before any connection: exit 2, one
# line naming the setting, no secret (no stack needed: nothing is reached).
KEY_FILE = str(ROOT / "README.md")  # exists; never read, the contradiction is found first
MISCONFIGURED = [
    (
        ["ingress"],
        {
            "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "KAFKA_SASL_USERNAME": "app",
            "KAFKA_SASL_PASSWORD": SASL_MARKER,
        },
        "KAFKA_SASL_MECHANISM",
    ),
    (["router"], {"KAFKA_SASL_PASSWORD": SASL_MARKER}, "KAFKA_SASL_PASSWORD"),
    (["router"], {"KAFKA_SSL_CAFILE": KEY_FILE}, "KAFKA_SSL_CAFILE"),
    (["worker"], {"TEMPORAL_TLS_CLIENT_KEY_PATH": KEY_FILE}, "TEMPORAL_TLS_CLIENT_CERT_PATH"),
    (["worker"], {"TEMPORAL_TLS": "false", "TEMPORAL_API_KEY": API_MARKER}, "TEMPORAL_TLS"),
    (
        ["migrate", "--database-url", f"postgresql://app@127.0.0.1:1/x?password={DB_MARKER}"],
        {},
        "--database-url",
    ),
]


async def _run_argv(argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app.cli",
        *argv,
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), BOUND)
    return int(proc.returncode or 0), out.decode(errors="replace"), err.decode(errors="replace")


@pytest.mark.timeout(120)
async def test_misconfiguration_is_refused_at_start_up():
    results = await asyncio.gather(
        *(
            # nothing reachable, should a refusal fail to happen
            _run_argv(
                argv,
                clean_env(INGEST_METRICS_PORT="0", **BAD_KAFKA, **BAD_TEMPORAL, **BAD_DB, **bad),
            )
            for argv, bad, _ in MISCONFIGURED
        )
    )
    for (argv, bad, setting), (code, out, err) in zip(MISCONFIGURED, results, strict=True):
        what = f"{' '.join(argv[:1])} with {sorted(bad)}"
        assert code == 2, f"{what}: exit {code}\n{out}{err}"
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and setting in lines[0], f"{what}:\n{err}"
        for marker in (DB_MARKER, API_MARKER, SASL_MARKER):
            assert marker not in out + err, f"{what}: secret {marker} printed"
