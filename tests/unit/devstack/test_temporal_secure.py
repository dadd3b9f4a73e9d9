"""The secured real Temporal server's pieces, as pure logic (stack/devstack/temporal_secure.py):
the process plan and ports, the config it renders, the certificates, the JWKS and tokens.
The server itself is exercised in tests/integration/secure_temporal/."""

from __future__ import annotations

import datetime as dt
import json
import os
import stat
from pathlib import Path

import jwt
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from devstack import manager
from devstack import temporal_secure as ts
from devstack.certs import CertFiles
from devstack.settings import StackSettings
from devstack.temporal_server import TemporalServer, plan, port_offsets, server_config

from pipeline.settings import TemporalSettings

PG = "postgresql://postgres@127.0.0.1:5555/ingest"


def _cfg(tmp: Path = Path("/nonexistent"), **kw: object) -> StackSettings:
    return StackSettings(dir=tmp, temporal="server", **kw)  # type: ignore[arg-type]


def _files(root: Path) -> ts.SecureFiles:
    stack = CertFiles(root / "pki/f.pem", root / "pki/f.key", root / "pki/ca.pem")
    inode = CertFiles(root / "i/i.pem", root / "i/i.key", root / "i/ca.pem")
    return ts.SecureFiles(frontend=stack, internode=inode, jwks_dir=root / "jwks")


@pytest.mark.parametrize("shape", ["single", "split"])
def test_secured_the_internal_frontend_runs_beside_the_frontend(shape):
    plain = plan(_cfg(temporal_shape=shape))
    secured = plan(_cfg(temporal_shape=shape, secure=True))
    assert [p.name for p in plain] == [p.name for p in secured]
    front = next(p for p in secured if "frontend" in p.services)
    assert front.services[:2] == ("frontend", "internal-frontend")
    assert all("internal-frontend" not in p.services for p in plain)


@pytest.mark.parametrize("shape", ["single", "split"])
def test_secured_ports_are_distinct_and_counted(shape):
    cfg = _cfg(temporal_shape=shape, secure=True, temporal_port=20000)
    offsets = port_offsets(cfg)
    assert len(set(offsets)) == len(offsets), offsets
    for port in (ts.internal_frontend_port(cfg), ts.jwks_port(cfg)):
        assert port - 20000 in offsets
    assert ts.internal_frontend_port(cfg) - 300 - 20000 in offsets


def test_secured_config_requires_client_certificates_and_jwts(tmp_path):
    root = tmp_path / "a dir: with spaces"
    cfg = _cfg(tmp_path, secure=True, temporal_port=20000)
    (proc,) = plan(cfg)
    conf = server_config(cfg, proc, PG, Path("/x/dyn.yaml"), _files(root))
    tls = conf["global"]["tls"]
    front = tls["frontend"]["server"]
    assert front["requireClientAuth"] is True
    assert front["certFile"] == str(root / "pki/f.pem")
    assert front["clientCaFiles"] == [str(root / "pki/ca.pem")]
    inode = tls["internode"]
    assert inode["server"]["requireClientAuth"] is True
    # Its own CA: a client certificate of the stack's CA never opens the internal frontend.
    assert inode["server"]["clientCaFiles"] == [str(root / "i/ca.pem")]
    assert inode["client"]["rootCaFiles"] == [str(root / "i/ca.pem")]
    auth = conf["global"]["authorization"]
    assert (auth["authorizer"], auth["claimMapper"], auth["permissionsClaimName"]) == (
        "default",
        "default",
        "permissions",
    )
    assert auth["jwtKeyProvider"]["keySourceURIs"] == ["http://127.0.0.1:20012/jwks.json"]
    assert conf["services"]["internal-frontend"]["rpc"]["grpcPort"] == 20008
    assert conf["global"]["metrics"]  # the plain config's globals are kept


def test_the_plain_config_has_no_security_and_no_internal_frontend():
    cfg = _cfg()
    (proc,) = plan(cfg)
    conf = server_config(cfg, proc, PG, Path("/x/dyn.yaml"))
    assert "tls" not in conf["global"] and "authorization" not in conf["global"]
    assert "internal-frontend" not in conf["services"]


def test_the_internode_certificate_serves_and_authenticates_under_its_own_ca(tmp_path):
    cfg = _cfg(tmp_path, secure=True)
    files = ts.ensure_files(cfg)
    inode = x509.load_pem_x509_certificate(files.internode.cert.read_bytes())
    usages = set(inode.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    assert usages == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    inode_ca = x509.load_pem_x509_certificate(files.internode.ca.read_bytes())
    stack_ca = x509.load_pem_x509_certificate(files.frontend.ca.read_bytes())
    inode.verify_directly_issued_by(inode_ca)
    assert inode_ca.subject != stack_ca.subject
    client = x509.load_pem_x509_certificate(ts.client_cert(cfg).cert.read_bytes())
    client.verify_directly_issued_by(stack_ca)
    with pytest.raises(ValueError):  # the stack's client certificate is not internode's
        client.verify_directly_issued_by(inode_ca)
    assert stat.S_IMODE(files.internode.key.stat().st_mode) == 0o600
    assert ts.ensure_files(cfg).internode == files.internode  # made once
    assert files.internode.cert.read_bytes() == ts.internode_cert(cfg).cert.read_bytes()


def test_a_minted_token_verifies_against_the_served_jwks(tmp_path):
    cfg = _cfg(tmp_path, secure=True)
    files = ts.ensure_files(cfg)
    served = json.loads((files.jwks_dir / ts.JWKS_FILE).read_text())
    assert [k["kid"] for k in served["keys"]] == [ts.key_id(ts.signing_key(cfg))]
    assert all("d" not in k for k in served["keys"])  # public keys only
    token = ts.token(cfg, ["default:write"], subject="alice")
    header = jwt.get_unverified_header(token)
    jwk = jwt.PyJWKSet.from_dict(served)[header["kid"]]
    claims = jwt.decode(token, jwk.key, algorithms=["ES256"])
    assert claims["sub"] == "alice" and claims["permissions"] == ["default:write"]
    assert claims["exp"] - claims["iat"] == 3600


def test_another_key_has_another_kid_and_fails_verification(tmp_path):
    cfg = _cfg(tmp_path, secure=True)
    ours = ts.signing_key(cfg)
    theirs = ec.generate_private_key(ec.SECP256R1())
    assert ts.key_id(theirs) != ts.key_id(ours)
    forged = ts.mint(theirs, [ts.SYSTEM_ADMIN], kid=ts.key_id(ours))
    jwk = jwt.PyJWKSet.from_dict(ts.jwks([ours]))[ts.key_id(ours)]
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(forged, jwk.key, algorithms=["ES256"])


def test_an_expired_token_is_expired():
    key = ec.generate_private_key(ec.SECP256R1())
    old = dt.datetime.now(dt.UTC) - dt.timedelta(hours=2)
    token = ts.mint(key, ["default:admin"], now=old)
    with pytest.raises(jwt.ExpiredSignatureError):
        jwt.decode(token, key.public_key(), algorithms=["ES256"])


def test_client_env_names_the_settings_the_pipeline_reads(tmp_path):
    cfg = _cfg(tmp_path, secure=True, temporal_port=7333)
    env = ts.client_env(cfg, api_key="tok")
    fields = {f"TEMPORAL_{name.upper()}" for name in TemporalSettings.model_fields}
    assert set(env) <= fields, set(env) - fields
    assert env["TEMPORAL_ADDRESS"] == "127.0.0.1:7333"
    assert Path(env["TEMPORAL_TLS_CLIENT_KEY_PATH"]).exists()
    assert env["TEMPORAL_API_KEY"] == "tok"
    # The printed line reads the key from its file: the secret is never printed.
    line = ts.client_lines(cfg)[1]
    assert f'TEMPORAL_API_KEY="$(cat {ts.api_key_path(cfg)})"' in line


def test_the_api_key_file_is_private_and_fresh(tmp_path):
    cfg = _cfg(tmp_path, secure=True)
    path = ts.write_api_key(cfg)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    claims = jwt.decode(
        path.read_text().strip(), ts.signing_key(cfg).public_key(), algorithms=["ES256"]
    )
    assert claims["permissions"] == list(ts.API_KEY_PERMISSIONS)
    assert claims["exp"] - claims["iat"] == int(ts.API_KEY_TTL.total_seconds())


@pytest.mark.parametrize("started_secured", [True, False])
def test_status_tells_a_secured_server_by_its_running_config(tmp_path, started_secured):
    # `status` without --secure still knows (and handshakes with) a secured server, and the
    # other way round: the running frontend's config decides, not the setting of the day.
    cfg = _cfg(tmp_path, secure=not started_secured)
    server = TemporalServer(cfg)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "temporal-server.pid").write_text(str(os.getpid()))  # alive
    server.home.mkdir(parents=True)
    conf = {"global": {"authorization": {"authorizer": "default"}}} if started_secured else {}
    (server.home / "temporal-server.yaml").write_text(yaml.safe_dump(conf))
    assert server.running_secured() is started_secured
    assert server.secured() is started_secured
    assert ("JWT authorizer" in server.summary()) is started_secured


def test_nothing_running_the_setting_decides(tmp_path):
    assert TemporalServer(_cfg(tmp_path, secure=True)).secured() is True
    assert TemporalServer(_cfg(tmp_path)).running_secured() is None


def test_up_secure_prints_the_temporal_variables_or_says_the_dev_server_is_plain(tmp_path):
    lines = manager.temporal_client_lines(_cfg(tmp_path, secure=True))
    assert lines[1].startswith("export TEMPORAL_ADDRESS=127.0.0.1:7233 ")
    assert stat.S_IMODE(ts.api_key_path(_cfg(tmp_path)).stat().st_mode) == 0o600
    dev = StackSettings(dir=tmp_path / "dev", temporal="dev", secure=True)
    assert manager.temporal_client_lines(dev) == [
        "# Temporal: the dev server has no TLS; --temporal server runs it secured"
    ]
