"""Kafka security settings: every misconfiguration is refused at load with one line naming
the variable, and what is accepted becomes aiokafka kwargs that aiokafka's own clients
take (SASL_SSL + SCRAM-SHA-512, mTLS with a plain or encrypted key, OAUTHBEARER)."""

from __future__ import annotations

import os
import ssl
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.abc import AbstractTokenProvider
from aiokafka.admin import AIOKafkaAdminClient

from pipeline import settings
from tests.unit.pipeline import tls_material

UNSECURED = "pipeline.kafka_oauth:UnsecuredJwtProvider"


@pytest.fixture(autouse=True)
def _no_kafka_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("KAFKA_"):
            monkeypatch.delenv(name)


@pytest.fixture(scope="module")
def pem(tmp_path_factory: pytest.TempPathFactory) -> tls_material.Material:
    return tls_material.make(tmp_path_factory.mktemp("kafka-tls"))


def _refused(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> str:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(settings.ConfigError) as info:
        settings.load_settings()
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    ("env", "named"),
    [
        # SASL without a mechanism used to mean PLAIN in silence
        (
            {
                "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
                "KAFKA_SASL_USERNAME": "u",
                "KAFKA_SASL_PASSWORD": "p",
            },
            "KAFKA_SASL_MECHANISM",
        ),
        ({"KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT"}, "KAFKA_SASL_MECHANISM"),
        # SASL credentials that would never be sent
        ({"KAFKA_SASL_USERNAME": "u"}, "KAFKA_SASL_USERNAME"),
        ({"KAFKA_SASL_PASSWORD": "p"}, "KAFKA_SASL_PASSWORD"),
        ({"KAFKA_SASL_MECHANISM": "SCRAM-SHA-512"}, "KAFKA_SASL_MECHANISM"),
        (
            {"KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SASL_PASSWORD": "p"},
            "KAFKA_SASL_PASSWORD",
        ),
        ({"KAFKA_SASL_OAUTH_TOKEN_PROVIDER": UNSECURED}, "KAFKA_SASL_OAUTH_TOKEN_PROVIDER"),
        # SCRAM/PLAIN without their credentials
        (
            {
                "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
                "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
                "KAFKA_SASL_USERNAME": "u",
            },
            "KAFKA_SASL_PASSWORD",
        ),
        (
            {
                "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
                "KAFKA_SASL_MECHANISM": "PLAIN",
                "KAFKA_SASL_PASSWORD": "p",
            },
            "KAFKA_SASL_USERNAME",
        ),
        # OAUTHBEARER: a provider is required, username/password are not used
        (
            {"KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_MECHANISM": "OAUTHBEARER"},
            "KAFKA_SASL_OAUTH_TOKEN_PROVIDER",
        ),
        (
            {
                "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
                "KAFKA_SASL_MECHANISM": "OAUTHBEARER",
                "KAFKA_SASL_OAUTH_TOKEN_PROVIDER": UNSECURED,
                "KAFKA_SASL_OAUTH_SUBJECT": "ingest",
                "KAFKA_SASL_PASSWORD": "p",
            },
            "KAFKA_SASL_PASSWORD",
        ),
        (
            {
                "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
                "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
                "KAFKA_SASL_USERNAME": "u",
                "KAFKA_SASL_PASSWORD": "p",
                "KAFKA_SASL_OAUTH_TOKEN_PROVIDER": UNSECURED,
            },
            "KAFKA_SASL_OAUTH_TOKEN_PROVIDER",
        ),
        # the built-in provider without its subject
        (
            {
                "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
                "KAFKA_SASL_MECHANISM": "OAUTHBEARER",
                "KAFKA_SASL_OAUTH_TOKEN_PROVIDER": UNSECURED,
            },
            "KAFKA_SASL_OAUTH_SUBJECT",
        ),
        # providers that cannot be loaded
        (
            {
                "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
                "KAFKA_SASL_MECHANISM": "OAUTHBEARER",
                "KAFKA_SASL_OAUTH_TOKEN_PROVIDER": "no_such_module_x:Provider",
            },
            "KAFKA_SASL_OAUTH_TOKEN_PROVIDER",
        ),
        (
            {
                "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
                "KAFKA_SASL_MECHANISM": "OAUTHBEARER",
                "KAFKA_SASL_OAUTH_TOKEN_PROVIDER": "pipeline.kafka_oauth",
            },
            "KAFKA_SASL_OAUTH_TOKEN_PROVIDER",
        ),
        (
            {
                "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
                "KAFKA_SASL_MECHANISM": "OAUTHBEARER",
                "KAFKA_SASL_OAUTH_TOKEN_PROVIDER": "pipeline.kafka_oauth:Nothing",
            },
            "KAFKA_SASL_OAUTH_TOKEN_PROVIDER",
        ),
        (
            {"KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CAFILE": "/nonexistent/ca.pem"},
            "KAFKA_SSL_CAFILE",
        ),
        # a TLS setting off TLS
        ({"KAFKA_SSL_CHECK_HOSTNAME": "false"}, "KAFKA_SSL_CHECK_HOSTNAME"),
        ({"KAFKA_SSL_PASSWORD": "x"}, "KAFKA_SSL_PASSWORD"),
    ],
)
def test_refused_naming_the_variable(
    env: dict[str, str], named: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    message = _refused(env, monkeypatch)
    assert message.startswith(f"invalid setting {named}: "), message
    assert "Value error" not in message


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SASL_PLAINTEXT"])
@pytest.mark.parametrize("field", ["cafile", "certfile", "keyfile"])
def test_tls_files_without_tls_are_refused(
    protocol: str, field: str, pem: tls_material.Material, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"KAFKA_SECURITY_PROTOCOL": protocol, f"KAFKA_SSL_{field.upper()}": str(pem.ca)}
    if protocol.startswith("SASL"):
        env |= {
            "KAFKA_SASL_MECHANISM": "PLAIN",
            "KAFKA_SASL_USERNAME": "u",
            "KAFKA_SASL_PASSWORD": "p",
        }
    message = _refused(env, monkeypatch)
    assert message.startswith(f"invalid setting KAFKA_SSL_{field.upper()}: ")
    assert f"KAFKA_SECURITY_PROTOCOL={protocol} uses no TLS" in message


def test_cert_and_key_go_together(pem: tls_material.Material, monkeypatch) -> None:
    monkeypatch.setenv("KAFKA_SECURITY_PROTOCOL", "SSL")
    monkeypatch.setenv("KAFKA_SSL_KEYFILE", str(pem.key))
    assert _refused({}, monkeypatch).startswith("invalid setting KAFKA_SSL_CERTFILE: ")
    monkeypatch.delenv("KAFKA_SSL_KEYFILE")
    monkeypatch.setenv("KAFKA_SSL_CERTFILE", str(pem.cert))
    assert _refused({}, monkeypatch).startswith("invalid setting KAFKA_SSL_KEYFILE: ")
    # one PEM file holding both is what ssl.load_cert_chain reads without a key file
    monkeypatch.setenv("KAFKA_SSL_CERTFILE", str(pem.combined))
    assert isinstance(settings.load_settings().kafka.ssl_context(), ssl.SSLContext)


def test_missing_files_are_refused(pem: tls_material.Material, monkeypatch) -> None:
    for env in ("KAFKA_SSL_CERTFILE", "KAFKA_SSL_KEYFILE"):
        monkeypatch.setenv("KAFKA_SECURITY_PROTOCOL", "SSL")
        monkeypatch.setenv("KAFKA_SSL_CERTFILE", str(pem.cert))
        monkeypatch.setenv("KAFKA_SSL_KEYFILE", str(pem.key))
        monkeypatch.setenv(env, "/nonexistent/file.pem")
        message = _refused({}, monkeypatch)
        assert message == f"invalid setting {env}: no such file: /nonexistent/file.pem"


def test_encrypted_key_needs_its_password(pem: tls_material.Material, monkeypatch) -> None:
    monkeypatch.setenv("KAFKA_SECURITY_PROTOCOL", "SSL")
    monkeypatch.setenv("KAFKA_SSL_CERTFILE", str(pem.cert))
    monkeypatch.setenv("KAFKA_SSL_KEYFILE", str(pem.encrypted_key))
    # no password: refused at load (OpenSSL does not prompt on the terminal)
    assert _refused({}, monkeypatch).startswith("invalid setting KAFKA_SSL_PASSWORD: ")
    message = _refused({"KAFKA_SSL_PASSWORD": "badPASSmarker9"}, monkeypatch)
    assert message.startswith("invalid setting KAFKA_SSL_PASSWORD: ")
    assert "badPASSmarker9" not in message
    monkeypatch.setenv("KAFKA_SSL_PASSWORD", tls_material.KEY_PASSWORD)
    cfg = settings.load_settings().kafka
    assert tls_material.KEY_PASSWORD not in repr(cfg)
    assert isinstance(cfg.client_kwargs()["ssl_context"], ssl.SSLContext)


def test_key_that_does_not_match_the_cert(pem: tls_material.Material, monkeypatch) -> None:
    message = _refused(
        {
            "KAFKA_SECURITY_PROTOCOL": "SSL",
            "KAFKA_SSL_CERTFILE": str(pem.cert),
            "KAFKA_SSL_KEYFILE": str(pem.other_key),
        },
        monkeypatch,
    )
    assert message.startswith("invalid setting KAFKA_SSL_PASSWORD: ")
    assert "does not match" in message


def test_a_file_that_is_no_ca(pem: tls_material.Material, monkeypatch, tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    message = _refused(
        {"KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CAFILE": str(junk)}, monkeypatch
    )
    assert message.startswith("invalid setting KAFKA_SSL_CAFILE: cannot load ")


def test_mechanism_and_protocol_take_any_case(monkeypatch) -> None:
    monkeypatch.setenv("KAFKA_SECURITY_PROTOCOL", "sasl_plaintext")
    monkeypatch.setenv("KAFKA_SASL_MECHANISM", " scram-sha-512 ")
    monkeypatch.setenv("KAFKA_SASL_USERNAME", "u")
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", "p")
    k = settings.load_settings().kafka
    assert (k.security_protocol, k.sasl_mechanism) == ("SASL_PLAINTEXT", "SCRAM-SHA-512")


def test_blank_values_mean_unset(monkeypatch) -> None:
    # A ConfigMap or Secret key left empty is "not set", as for the other secrets.
    for env in (
        "KAFKA_SASL_MECHANISM",
        "KAFKA_SASL_USERNAME",
        "KAFKA_SSL_CAFILE",
        "KAFKA_SSL_PASSWORD",
    ):
        monkeypatch.setenv(env, "")
    assert settings.load_settings().kafka.client_kwargs()["security_protocol"] == "PLAINTEXT"


# --- what aiokafka gets ------------------------------------------------------------------


async def _takes(kw: dict[str, object]) -> None:
    """aiokafka's own clients accept ``kw`` (they check protocol, mechanism, context and
    credentials in their constructors); nothing connects."""
    producer = AIOKafkaProducer(**kw)  # type: ignore[arg-type]
    consumer = AIOKafkaConsumer(**kw)  # type: ignore[arg-type]
    admin = AIOKafkaAdminClient(**kw)  # type: ignore[arg-type]
    await producer.stop()
    await consumer.stop()
    await admin.close()


async def test_sasl_ssl_scram_sha_512(pem: tls_material.Material) -> None:
    k = settings.KafkaSettings(
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="ingest",
        sasl_password="s3cret",
        ssl_cafile=pem.ca,
    )
    kw = k.client_kwargs()
    assert kw["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (kw["sasl_plain_username"], kw["sasl_plain_password"]) == ("ingest", "s3cret")
    ctx = kw["ssl_context"]
    assert isinstance(ctx, ssl.SSLContext)
    assert ctx.check_hostname and ctx.verify_mode == ssl.CERT_REQUIRED
    assert ctx.get_ca_certs()[0]["subject"] == ((("commonName", "unit test CA"),),)
    assert "sasl_oauth_token_provider" not in kw
    await _takes(kw)


async def test_mtls(pem: tls_material.Material) -> None:
    k = settings.KafkaSettings(
        security_protocol="SSL",
        ssl_cafile=pem.ca,
        ssl_certfile=pem.cert,
        ssl_keyfile=pem.encrypted_key,
        ssl_password=tls_material.KEY_PASSWORD,
        ssl_check_hostname=False,
    )
    kw = k.client_kwargs()
    assert not any(key.startswith("sasl") for key in kw)
    ctx = kw["ssl_context"]
    assert isinstance(ctx, ssl.SSLContext)
    assert not ctx.check_hostname and ctx.verify_mode == ssl.CERT_REQUIRED
    await _takes(kw)


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SASL_PLAINTEXT"])
async def test_oauthbearer(protocol: str) -> None:
    k = settings.KafkaSettings(
        security_protocol=protocol,
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=UNSECURED,
        sasl_oauth_subject="ingest",
    )
    kw = k.client_kwargs()
    provider = kw["sasl_oauth_token_provider"]
    assert isinstance(provider, AbstractTokenProvider)
    assert "sasl_plain_username" not in kw
    assert ("ssl_context" in kw) == (protocol == "SASL_SSL")
    token = await provider.token()
    assert token.count(".") == 2 and token.endswith(".")
    await _takes(kw)


def test_secrets_stay_out_of_repr(pem: tls_material.Material) -> None:
    k = settings.KafkaSettings(
        security_protocol="SASL_SSL",
        sasl_mechanism="PLAIN",
        sasl_username="key",
        sasl_password="api-secret-x1",
        ssl_certfile=pem.cert,
        ssl_keyfile=pem.encrypted_key,
        ssl_password=tls_material.KEY_PASSWORD,
    )
    text = repr(k) + k.model_dump_json()
    assert "api-secret-x1" not in text and tls_material.KEY_PASSWORD not in text
