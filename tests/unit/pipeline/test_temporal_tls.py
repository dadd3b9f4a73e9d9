"""Temporal TLS: what ``temporal_client`` connects with (:func:`pipeline.clients.temporal_tls`,
no server), and the settings refused at load, each with one line naming the variable."""

from __future__ import annotations

import os

import pytest
from temporalio.service import TLSConfig

from pipeline import settings
from pipeline.clients import temporal_tls
from tests.unit.pipeline import tls_material


@pytest.fixture(autouse=True)
def _no_temporal_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("TEMPORAL_"):
            monkeypatch.delenv(name)


@pytest.fixture(scope="module")
def pem(tmp_path_factory: pytest.TempPathFactory) -> tls_material.Material:
    return tls_material.make(tmp_path_factory.mktemp("temporal-tls"))


def _load(**env: object) -> settings.TemporalSettings:
    return settings.build(settings.TemporalSettings, **env)


def _refused(monkeypatch: pytest.MonkeyPatch, **env: str) -> str:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(settings.ConfigError) as info:
        settings.load_settings()
    assert "\n" not in str(info.value)
    return str(info.value)


def test_plaintext_by_default() -> None:
    assert temporal_tls(_load()) is False


def test_tls_on_system_roots() -> None:
    assert temporal_tls(_load(tls=True)) is True


def test_api_key_implies_tls() -> None:
    assert temporal_tls(_load(api_key="k")) is True


def test_server_name_alone_implies_tls_with_that_name() -> None:
    tls = temporal_tls(_load(tls_server_name="ns.acct.tmprl.cloud"))
    assert tls == TLSConfig(domain="ns.acct.tmprl.cloud")


def test_mtls_from_files(pem: tls_material.Material) -> None:
    cfg = _load(
        tls_server_ca_cert_path=str(pem.ca),
        tls_client_cert_path=str(pem.cert),
        tls_client_key_path=str(pem.key),
        tls_server_name="temporal.internal",
    )
    assert temporal_tls(cfg) == TLSConfig(
        server_root_ca_cert=pem.ca.read_bytes(),
        domain="temporal.internal",
        client_cert=pem.cert.read_bytes(),
        client_private_key=pem.key.read_bytes(),
    )


def test_mtls_from_pem_text(pem: tls_material.Material, monkeypatch) -> None:
    # The variables temporalio.envconfig reads: TEMPORAL_TLS_*_DATA.
    monkeypatch.setenv("TEMPORAL_TLS_SERVER_CA_CERT_DATA", pem.ca.read_text())
    monkeypatch.setenv("TEMPORAL_TLS_CLIENT_CERT_DATA", pem.cert.read_text())
    # a one-line .env file can only hold the key with \n escapes
    monkeypatch.setenv("TEMPORAL_TLS_CLIENT_KEY_DATA", pem.key.read_text().replace("\n", "\\n"))
    cfg = settings.load_settings().temporal
    assert pem.key.read_text().strip() not in repr(cfg)
    tls = temporal_tls(cfg)
    assert isinstance(tls, TLSConfig)
    assert tls.server_root_ca_cert == pem.ca.read_bytes()
    assert tls.client_cert == pem.cert.read_bytes()
    assert tls.client_private_key == pem.key.read_bytes()
    assert tls.domain is None


def test_ca_only_verifies_a_private_server(pem: tls_material.Material) -> None:
    tls = temporal_tls(_load(tls_server_ca_cert_path=str(pem.ca)))
    assert tls == TLSConfig(server_root_ca_cert=pem.ca.read_bytes())


def test_api_key_with_mtls_and_name(pem: tls_material.Material) -> None:
    cfg = _load(
        api_key="k",
        tls_client_cert_path=str(pem.cert),
        tls_client_key_path=str(pem.key),
    )
    tls = temporal_tls(cfg)
    assert isinstance(tls, TLSConfig) and tls.client_cert == pem.cert.read_bytes()


@pytest.mark.parametrize(
    ("env", "named"),
    [
        # a client key without a certificate used to be ignored in silence
        ({"TEMPORAL_TLS_CLIENT_KEY_PATH": "{key}"}, "TEMPORAL_TLS_CLIENT_CERT_PATH"),
        ({"TEMPORAL_TLS_CLIENT_KEY_DATA": "{key_text}"}, "TEMPORAL_TLS_CLIENT_CERT_PATH"),
        ({"TEMPORAL_TLS_CLIENT_CERT_PATH": "{cert}"}, "TEMPORAL_TLS_CLIENT_KEY_PATH"),
        ({"TEMPORAL_TLS_CLIENT_CERT_DATA": "{cert_text}"}, "TEMPORAL_TLS_CLIENT_KEY_PATH"),
        # a file and its text both
        (
            {
                "TEMPORAL_TLS_SERVER_CA_CERT_PATH": "{ca}",
                "TEMPORAL_TLS_SERVER_CA_CERT_DATA": "{ca_text}",
            },
            "TEMPORAL_TLS_SERVER_CA_CERT_DATA",
        ),
        (
            {
                "TEMPORAL_TLS_CLIENT_CERT_PATH": "{cert}",
                "TEMPORAL_TLS_CLIENT_CERT_DATA": "{cert_text}",
                "TEMPORAL_TLS_CLIENT_KEY_PATH": "{key}",
            },
            "TEMPORAL_TLS_CLIENT_CERT_DATA",
        ),
        # files that are not there
        (
            {"TEMPORAL_TLS_SERVER_CA_CERT_PATH": "/nonexistent/ca.pem"},
            "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
        ),
        (
            {
                "TEMPORAL_TLS_CLIENT_CERT_PATH": "{cert}",
                "TEMPORAL_TLS_CLIENT_KEY_PATH": "/nonexistent/k",
            },
            "TEMPORAL_TLS_CLIENT_KEY_PATH",
        ),
        # a path in a *_DATA variable
        ({"TEMPORAL_TLS_SERVER_CA_CERT_DATA": "{ca}"}, "TEMPORAL_TLS_SERVER_CA_CERT_DATA"),
        # TLS turned off explicitly, but something needs it
        ({"TEMPORAL_TLS": "false", "TEMPORAL_API_KEY": "k"}, "TEMPORAL_TLS"),
        ({"TEMPORAL_TLS": "false", "TEMPORAL_TLS_SERVER_NAME": "x"}, "TEMPORAL_TLS"),
        ({"TEMPORAL_TLS": "false", "TEMPORAL_TLS_SERVER_CA_CERT_PATH": "{ca}"}, "TEMPORAL_TLS"),
    ],
)
def test_refused_naming_the_variable(
    env: dict[str, str], named: str, pem: tls_material.Material, monkeypatch
) -> None:
    values = {
        "ca": str(pem.ca),
        "cert": str(pem.cert),
        "key": str(pem.key),
        "ca_text": pem.ca.read_text(),
        "cert_text": pem.cert.read_text(),
        "key_text": pem.key.read_text(),
    }
    filled = {k: v.format(**values) for k, v in env.items()}
    message = _refused(monkeypatch, **filled)
    assert message.startswith(f"invalid setting {named}: "), message
    assert "PRIVATE KEY" not in message


def test_blank_values_mean_unset(monkeypatch) -> None:
    for env in ("TEMPORAL_TLS", "TEMPORAL_TLS_SERVER_NAME", "TEMPORAL_TLS_CLIENT_KEY_DATA"):
        monkeypatch.setenv(env, "")
    assert temporal_tls(settings.load_settings().temporal) is False


def test_explicit_false_without_tls_options_is_plaintext(monkeypatch) -> None:
    monkeypatch.setenv("TEMPORAL_TLS", "false")
    assert temporal_tls(settings.load_settings().temporal) is False
