"""A Temporal connection that fails in TLS says which ``TEMPORAL_TLS_*`` setting to check.

``temporal_client``'s one ``Unreachable`` line ends with a hint from
:func:`pipeline.clients.temporal_hint` when a client certificate or a CA is configured.
No Temporal here: a local TLS server (Python's ``ssl``, a certificate of a throw-away CA,
client certificates required) stands in for the frontend, so the SDK's own handshake
errors are what the hint reads. The real refusals run against the secured real server
(tests/integration/secure_temporal/)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from devstack.certs import Pki

from pipeline.clients import Unreachable, temporal_client, temporal_hint
from pipeline.settings import TemporalSettings

CLIENT_CERT = "TEMPORAL_TLS_CLIENT_CERT_PATH"
SERVER_CA = "TEMPORAL_TLS_SERVER_CA_CERT_PATH"
SERVER_NAME = "TEMPORAL_TLS_SERVER_NAME"


@pytest.fixture(autouse=True)
def _no_temporal_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith(("TEMPORAL_", "INGEST_CODEC_")):
            monkeypatch.delenv(name)


@pytest.fixture(scope="module")
def pkis(tmp_path_factory: pytest.TempPathFactory) -> tuple[Pki, Pki]:
    folder = tmp_path_factory.mktemp("temporal-hint")
    return Pki(folder / "ca"), Pki(folder / "other", name="another CA")


@contextlib.asynccontextmanager
async def _tls_server(pki: Pki) -> AsyncIterator[str]:
    """A TLS listener that requires a client certificate of ``pki`` and then hangs up."""
    cert = pki.server("temporal")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca_cert))
    ctx.load_cert_chain(str(cert.chain), str(cert.key))
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.set_alpn_protocols(["h2"])

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            await reader.read(100)
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0, ssl=ctx)
    try:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()


async def _refused(**fields: object) -> str:
    with pytest.raises(Unreachable) as info:
        await temporal_client(TemporalSettings(**fields), timeout=3)  # type: ignore[arg-type]
    text = str(info.value)
    assert "\n" not in text, text
    return text


async def test_no_client_certificate_points_at_the_client_certificate(pkis) -> None:
    ours, _ = pkis
    async with _tls_server(ours) as address:
        text = await _refused(address=address, tls_server_ca_cert_path=ours.ca_cert)
    ended = "the server ended the TLS connection: it may refuse the client certificate of"
    assert f"{ended} {CLIENT_CERT}" in text, text
    assert SERVER_CA in text and SERVER_NAME in text


async def test_a_client_certificate_of_another_ca_points_at_it(pkis) -> None:
    ours, other = pkis
    intruder = other.client("intruder")
    async with _tls_server(ours) as address:
        text = await _refused(
            address=address,
            tls_server_ca_cert_path=ours.ca_cert,
            tls_client_cert_path=intruder.cert,
            tls_client_key_path=intruder.key,
        )
    assert f"refuse the client certificate of {CLIENT_CERT}" in text, text


async def test_a_wrong_server_ca_points_at_the_ca_setting(pkis) -> None:
    ours, other = pkis
    client = ours.client("client")
    async with _tls_server(ours) as address:
        text = await _refused(
            address=address,
            tls_server_ca_cert_path=other.ca_cert,
            tls_client_cert_path=client.cert,
            tls_client_key_path=client.key,
        )
    assert "UnknownIssuer" in text, text
    assert f"the server's certificate was not verified: {SERVER_CA} (or _DATA)" in text, text
    assert CLIENT_CERT not in text


async def test_a_name_the_certificate_lacks_points_at_the_server_name(pkis) -> None:
    ours, _ = pkis
    async with _tls_server(ours) as address:
        text = await _refused(
            address=address,
            tls_server_ca_cert_path=ours.ca_cert,
            tls_server_name="temporal.elsewhere.example",
        )
    assert "NotValidForName" in text, text
    assert text.endswith(f"set {SERVER_NAME} to a name in it"), text


async def test_no_hint_without_a_certificate_or_ca_configured(pkis) -> None:
    # TLS on the system roots (e.g. an API key alone): the SDK's error says enough.
    ours, _ = pkis
    async with _tls_server(ours) as address:
        text = await _refused(address=address, tls=True)
    assert "InvalidCertificate" in text, text
    assert "TEMPORAL_TLS_" not in text, text


async def test_no_hint_when_nothing_listens(pkis, tmp_path: Path) -> None:
    ours, _ = pkis
    text = await _refused(address="127.0.0.1:1", tls_server_ca_cert_path=ours.ca_cert)
    assert "TEMPORAL_TLS_" not in text and "TEMPORAL_ADDRESS=127.0.0.1:1" in text, text


@pytest.mark.parametrize(
    "error",
    [
        "Status { message: transport error, ... received fatal alert: CertificateRequired }",
        "hyper::Error(Io, Custom { kind: BrokenPipe, error: stream closed because of a broken pipe",
        "peer closed connection without sending TLS close_notify",
        "ConnectError(Custom { kind: UnexpectedEof, error: tls handshake eof })",
        "transport error, hyper::Error(Io, Kind(ConnectionReset))",
    ],
)
def test_the_server_ending_the_handshake_points_at_the_client_certificate(error: str) -> None:
    # Settings as loaded (a certificate alone would be refused at load: it needs its key).
    cfg = TemporalSettings.model_construct(tls_client_cert_data="-----BEGIN CERTIFICATE-----")
    assert CLIENT_CERT in temporal_hint(cfg, error)
    assert temporal_hint(TemporalSettings(api_key="k"), error) == ""  # nothing configured


def test_the_ca_as_data_counts_as_configured() -> None:
    cfg = TemporalSettings.model_construct(tls_server_ca_cert_data="-----BEGIN CERTIFICATE-----")
    assert SERVER_CA in temporal_hint(cfg, "InvalidCertificate(UnknownIssuer)")
    assert temporal_hint(cfg, "tcp connect error: Connection refused") == ""
