"""A Kafka connection that fails at start-up says why, and names the setting it points at.

aiokafka only logs the reason (refused credentials, an unverified certificate) and raises
a bare "Unable to bootstrap"; ``check_kafka`` puts the reason and a hint in its one line.
No broker here: a refused port and a local TCP server that answers a TLS client with
plaintext stand in for the listener. The real refusals (wrong password, wrong CA, expired
certificate) run against the secured stack's broker."""

from __future__ import annotations

import asyncio
import os

import pytest

from pipeline import settings
from pipeline.clients import Unreachable, check_kafka, kafka_hint


@pytest.fixture(autouse=True)
def _no_kafka_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("KAFKA_"):
            monkeypatch.delenv(name)


async def test_refused_port_keeps_the_reason() -> None:
    cfg = settings.KafkaSettings(bootstrap_servers="127.0.0.1:1")
    with pytest.raises(Unreachable) as info:
        await check_kafka(cfg, timeout=5)
    message = str(info.value)
    assert "KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:1" in message
    assert "(last error: " in message and "\n" not in message


async def test_tls_client_against_a_plaintext_listener() -> None:
    async def plaintext(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 400 Bad Request\r\n\r\n" * 8)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(plaintext, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        cfg = settings.KafkaSettings(bootstrap_servers=f"127.0.0.1:{port}", security_protocol="SSL")
        with pytest.raises(Unreachable) as info:
            await check_kafka(cfg, timeout=5)
    finally:
        server.close()
        await server.wait_closed()
    message = str(info.value)
    assert "KAFKA_SECURITY_PROTOCOL=SSL uses TLS; is this listener plaintext?" in message, message


@pytest.mark.parametrize(
    ("cause", "cfg", "names"),
    [
        (
            "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get issuer",
            {"security_protocol": "SSL"},
            "KAFKA_SSL_CAFILE",
        ),
        (
            "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: certificate has expired",
            {"security_protocol": "SSL"},
            "expired",
        ),
        (
            "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: IP address mismatch,"
            " certificate is not valid for '127.0.0.1'",
            {"security_protocol": "SSL"},
            "KAFKA_SSL_CHECK_HOSTNAME",
        ),
        (
            "[SSL: TLSV13_ALERT_CERTIFICATE_REQUIRED] tlsv13 alert certificate required",
            {"security_protocol": "SSL"},
            "KAFKA_SSL_CERTFILE",
        ),
        (
            "SaslAuthenticationFailed: [58] Authentication failed during authentication due to"
            " invalid credentials with SASL mechanism SCRAM-SHA-512",
            {
                "security_protocol": "SASL_SSL",
                "sasl_mechanism": "SCRAM-SHA-512",
                "sasl_username": "u",
                "sasl_password": "p",
            },
            "KAFKA_SASL_PASSWORD",
        ),
        (
            "UnsupportedSaslMechanismError: Kafka broker does not support SCRAM-SHA-256",
            {
                "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "SCRAM-SHA-256",
                "sasl_username": "u",
                "sasl_password": "p",
            },
            "KAFKA_SASL_MECHANISM=SCRAM-SHA-256",
        ),
        (
            # seen: SASL_PLAINTEXT against Kafka 4.1.1's PLAINTEXT listener
            'Unable connect to "127.0.0.1:9092": [Error 34] IllegalSaslStateError: <conn>',
            {
                "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "PLAIN",
                "sasl_username": "u",
                "sasl_password": "p",
            },
            "this listener speaks no SASL; is KAFKA_SECURITY_PROTOCOL=SASL_PLAINTEXT right",
        ),
        (
            "KafkaConnectionError: Connection at 127.0.0.1:9093 closed",
            {},
            "does this listener expect TLS or SASL (KAFKA_SECURITY_PROTOCOL=PLAINTEXT)?",
        ),
    ],
)
def test_hints(cause: str, cfg: dict[str, str], names: str) -> None:
    assert names in kafka_hint(cause, settings.KafkaSettings(**cfg))  # type: ignore[arg-type]


def test_client_certificate_refusals(tmp_path) -> None:
    from tests.unit.pipeline import tls_material

    pem = tls_material.make(tmp_path)
    cfg = settings.KafkaSettings(
        security_protocol="SSL", ssl_cafile=pem.ca, ssl_certfile=pem.cert, ssl_keyfile=pem.key
    )
    for cause in (
        "[SSL: TLSV13_ALERT_CERTIFICATE_REQUIRED] tlsv13 alert certificate required",
        "[SSL: SSLV3_ALERT_CERTIFICATE_EXPIRED] sslv3 alert certificate expired",
        "KafkaConnectionError: Connection at 127.0.0.1:9094 closed",
    ):
        assert "KAFKA_SSL_CERTFILE" in kafka_hint(cause, cfg), cause


def test_oauthbearer_refusal_hint() -> None:
    # Seen against Kafka 4.1.1: the refused token passes aiokafka's handshake, and the
    # metadata request that follows finds no broker.
    cfg = settings.KafkaSettings(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider="pipeline.kafka_oauth:UnsecuredJwtProvider",
        sasl_oauth_subject="ingest",
    )
    cause = "Unable to update metadata from ['bootstrap'] NodeNotReadyError: not ready"
    assert "refused the token of KAFKA_SASL_OAUTH_TOKEN_PROVIDER" in kafka_hint(cause, cfg)


def test_no_hint_for_an_unknown_cause() -> None:
    assert kafka_hint("something else", settings.KafkaSettings()) == ""
