"""The real Temporal server secured (``ingest stack up --secure --temporal server``).

What go.temporal.io/server 1.31.2 offers, and what the stack turns on (source read at
the v1.31.2 tag: ``common/config/config.go``, ``common/rpc/encryption/``,
``common/authorization/``, ``temporal/fx.go``, ``cmd/server/main.go``):

* **TLS on the frontend, client certificates required**: ``global.tls.frontend.server``
  with a certificate from the stack's CA (:func:`devstack.secure.pki`) and
  ``requireClientAuth`` against that CA. The frontend's HTTP API (``P+10``) takes the
  same TLS config.
* **The JWT authorizer and claim mapper**: ``global.authorization`` ``authorizer:
  default``, ``claimMapper: default``; tokens arrive as ``authorization: Bearer <JWT>``
  (what the SDKs send for an API key, so ``TEMPORAL_API_KEY`` carries the JWT), signed
  RS256 or ES256 by a key of the JWKS that ``jwtKeyProvider.keySourceURIs`` names, with
  ``permissions: ["<namespace>:<read|write|worker|admin>"]``; the whole cluster is the
  namespace name ``temporal-system`` (``primitives.SystemLocalNamespace``), so
  :data:`SYSTEM_ADMIN` is ``temporal-system:admin``, not ``system:admin``. The key
  provider fetches each URI with Go's ``http.Get``: http(s) only, no ``file://``
  (``default_token_key_provider.go``). So the stack serves the one JWKS file from
  Python's ``http.server`` on ``127.0.0.1:P+12`` (process ``temporal-jwks``), started
  before the server (the server reads the keys once at start, then every
  ``refreshInterval``).
* **The server's own calls**: with the default claim mapper, a caller with no token gets
  no role (only health checks and ``GetSystemInfo`` pass). The server's worker service
  and history therefore reach an **internal frontend** (``services.internal-frontend``,
  ``P+8``, run in the frontend's process), which maps every caller to system admin
  (``authorization.NewInternalClaimMapper``) and listens with the *internode* TLS.
* **Internode TLS**: history, matching and the internal frontend serve mutual TLS with a
  CA of their own (``<dir>/pki/temporal-internode``); every service presents the same
  internode certificate as server and as client (``FetchClientCertificate`` returns the
  server certificate), so it carries both serverAuth and clientAuth. A separate CA, so a
  client certificate of the stack's CA cannot open the internal frontend, which would
  skip the JWT. Not covered: the membership (ringpop) ports, ``P-300`` onwards, speak
  plain TChannel (the server has no TLS for them); they listen on 127.0.0.1 only.

:func:`client_env` gives the ``TEMPORAL_*`` variables a client needs (the pipeline's
names, which ``temporal`` CLI and ``temporalio.envconfig`` read too); :func:`mint` signs
tokens (tests sign bad ones with keys of their own).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from devstack import certs
from devstack.certs import CertFiles, Pki
from devstack.procs import Proc, StackError, port_open, port_owner, wait_for
from devstack.secure import pki
from devstack.settings import HOST, StackSettings
from devstack.templates import template

CLIENT_CN = "ingest-temporal-client"  # the client certificate the stack hands out
SERVER_NAME = "localhost"  # in every server certificate's names (with 127.0.0.1)
CLAIM = "permissions"  # the claim the default claim mapper reads
SYSTEM_ADMIN = "temporal-system:admin"  # every namespace and the cluster's own APIs
STACK_SUBJECT = "ingest-stack"  # the `sub` of the tokens the stack signs for itself
JWKS_PROC = "temporal-jwks"  # its pid file and log (run/, logs/)
JWKS_FILE = "jwks.json"
INTERNODE_CA = "ingest local stack Temporal internode CA"


def internal_frontend_port(cfg: StackSettings) -> int:
    return cfg.temporal_port + 8


def jwks_port(cfg: StackSettings) -> int:
    return cfg.temporal_port + 12


def jwks_url(cfg: StackSettings) -> str:
    return f"http://{HOST}:{jwks_port(cfg)}/{JWKS_FILE}"


def port_offsets() -> list[int]:
    """The ports the secured server adds, as offsets of ``temporal_port``: the internal
    frontend's gRPC and membership ports, and the JWKS server's."""
    return [8, 8 - 300, 12]


@dataclass(frozen=True)
class SecureFiles:
    """What the secured server's config names: its two certificates and the JWKS folder."""

    frontend: CertFiles  # from the stack's CA; clients verify it with that CA
    internode: CertFiles  # from the internode CA; serverAuth and clientAuth
    jwks_dir: Path  # holds JWKS_FILE only (the JWKS server's document root)


def home(cfg: StackSettings) -> Path:
    return cfg.dir.resolve() / "temporal-server"


def ensure_files(cfg: StackSettings) -> SecureFiles:
    """Certificates, the signing key and its JWKS, each made once and then kept."""
    jwks_dir = home(cfg) / "jwks"
    jwks_dir.mkdir(parents=True, exist_ok=True)
    (jwks_dir / JWKS_FILE).write_text(json.dumps(jwks([signing_key(cfg)]), indent=2))
    return SecureFiles(
        frontend=pki(cfg).server("temporal-frontend"),
        internode=internode_cert(cfg),
        jwks_dir=jwks_dir,
    )


def server_security(cfg: StackSettings, files: SecureFiles) -> dict[str, Any]:
    """``global.tls`` and ``global.authorization`` of the server config."""
    q = json.dumps  # a JSON string is a YAML string: paths need no further quoting
    text = template("temporal-secure.yaml").format(
        frontend_cert=q(str(files.frontend.cert)),
        frontend_key=q(str(files.frontend.key)),
        stack_ca=q(str(files.frontend.ca)),
        internode_cert=q(str(files.internode.cert)),
        internode_key=q(str(files.internode.key)),
        internode_ca=q(str(files.internode.ca)),
        server_name=q(SERVER_NAME),
        claim=q(CLAIM),
        jwks_url=q(jwks_url(cfg)),
    )
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


# --- certificates -------------------------------------------------------------------


def client_cert(cfg: StackSettings) -> CertFiles:
    """The client certificate the stack hands to Temporal clients (``TEMPORAL_TLS_*``)."""
    return pki(cfg).client(CLIENT_CN)


def internode_pki(cfg: StackSettings) -> Pki:
    return Pki(cfg.dir.resolve() / "pki" / "temporal-internode", name=INTERNODE_CA)


def internode_cert(cfg: StackSettings) -> CertFiles:
    """The one certificate every service presents to the others, as server and as client
    (Temporal's internode TLS uses the server certificate for both), made once.

    :class:`~devstack.certs.Pki` issues one extended key usage per certificate; this one
    needs two, so it is built here with the internode CA's key.
    """
    ca = internode_pki(cfg)
    files = CertFiles(ca.folder / "internode.pem", ca.folder / "internode.key", ca.ca_cert)
    if files.cert.exists() and files.key.exists():
        return files
    ca_key, ca_cert = ca._ensure_ca()
    key = ec.generate_private_key(ec.SECP256R1())
    start = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "temporal-internode")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + dt.timedelta(days=825))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.SubjectAlternativeName([certs._general_name(h) for h in certs.LOCAL_NAMES]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    certs._write_private(files.key, certs._key_pem(key))
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return files


# --- the signing key, its JWKS, tokens ------------------------------------------------


def signing_key(cfg: StackSettings) -> ec.EllipticCurvePrivateKey:
    """The stack's token signing key (ES256), ``<dir>/secure/temporal-jwt.key``, made once."""
    path = cfg.dir.resolve() / "secure" / "temporal-jwt.key"
    if path.exists():
        key = serialization.load_pem_private_key(path.read_bytes(), None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return key
    key = ec.generate_private_key(ec.SECP256R1())
    certs._write_private(path, certs._key_pem(key))
    return key


def key_id(key: ec.EllipticCurvePrivateKey) -> str:
    """``kid``: a digest of the public key, so a new key never reuses an old key's id."""
    der = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(der).hexdigest()[:16]


def jwks(keys: Sequence[ec.EllipticCurvePrivateKey]) -> dict[str, Any]:
    """The public JWK set of ``keys`` (what ``keySourceURIs`` serves)."""
    out = []
    for key in keys:
        nums = key.public_key().public_numbers()
        out.append(
            {
                "kty": "EC",
                "crv": "P-256",
                "use": "sig",
                "alg": "ES256",
                "kid": key_id(key),
                "x": _b64(nums.x.to_bytes(32, "big")),
                "y": _b64(nums.y.to_bytes(32, "big")),
            }
        )
    return {"keys": out}


def mint(
    key: ec.EllipticCurvePrivateKey,
    permissions: Sequence[str],
    *,
    subject: str = STACK_SUBJECT,
    ttl: dt.timedelta = dt.timedelta(hours=1),
    kid: str | None = None,
    now: dt.datetime | None = None,
) -> str:
    """A JWT (ES256) for the default claim mapper: ``sub``, ``permissions`` (e.g.
    ``["default:write"]``, ``[SYSTEM_ADMIN]``), ``iat`` and ``exp``; ``kid`` defaults to
    the key's own (tests pass another to sign with a key the server does not know)."""
    import jwt  # PyJWT, of the project's dev extra (the stack is installed beside it)

    issued = now or dt.datetime.now(dt.UTC)
    claims = {
        "sub": subject,
        CLAIM: list(permissions),
        "iat": int(issued.timestamp()),
        "exp": int((issued + ttl).timestamp()),
    }
    return jwt.encode(claims, key, algorithm="ES256", headers={"kid": kid or key_id(key)})


def token(cfg: StackSettings, permissions: Sequence[str], **kw: Any) -> str:
    """A token signed with the stack's key (see :func:`mint`)."""
    return mint(signing_key(cfg), permissions, **kw)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


# --- the JWKS server ------------------------------------------------------------------


def jwks_proc(cfg: StackSettings) -> Proc:
    return Proc(cfg.dir.resolve(), JWKS_PROC)


def ensure_jwks_server(cfg: StackSettings, files: SecureFiles) -> None:
    """Serve ``files.jwks_dir`` on ``127.0.0.1:P+12`` unless this stack already does."""
    proc = jwks_proc(cfg)
    port = jwks_port(cfg)
    if proc.pid() is not None:
        return
    if port_open(HOST, port):
        owner = port_owner(port)
        raise StackError(
            f"port {port} (INGEST_STACK_TEMPORAL_PORT + 12, the secured server's JWKS) is "
            f"taken{f' by pid {owner}' if owner else ''}; free it or move "
            "INGEST_STACK_TEMPORAL_PORT"
        )
    argv = [sys.executable, "-m", "http.server", str(port), "--bind", HOST]
    proc.start([*argv, "--directory", str(files.jwks_dir)])
    wait_for(lambda: port_open(HOST, port), "the JWKS server", proc, 15)


# --- clients --------------------------------------------------------------------------


def client_env(
    cfg: StackSettings, api_key: str | None = None, namespace: str = "default"
) -> dict[str, str]:
    """The ``TEMPORAL_*`` variables of a client of the secured server. ``api_key``
    defaults to ``$(cat <dir>/secure/temporal-api-key)`` (see :func:`write_api_key`)."""
    cert = client_cert(cfg)
    key = api_key if api_key is not None else f'"$(cat {api_key_path(cfg)})"'
    return {
        "TEMPORAL_ADDRESS": f"{HOST}:{cfg.temporal_port}",
        "TEMPORAL_NAMESPACE": namespace,
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(cert.ca),
        "TEMPORAL_TLS_CLIENT_CERT_PATH": str(cert.cert),
        "TEMPORAL_TLS_CLIENT_KEY_PATH": str(cert.key),
        "TEMPORAL_API_KEY": key,
    }


def api_key_path(cfg: StackSettings) -> Path:
    return cfg.dir.resolve() / "secure" / "temporal-api-key"


# The token `up --secure` writes for clients of the stack: `default`, as an admin (the
# pipeline's `ingest temporal setup` adds search attributes), valid a week.
API_KEY_PERMISSIONS = ("default:admin",)
API_KEY_TTL = dt.timedelta(days=7)


def write_api_key(cfg: StackSettings) -> Path:
    """A fresh token for ``default`` in ``<dir>/secure/temporal-api-key`` (mode 0600): a
    file, so the secret is never printed; ``up`` writes a new one every time."""
    path = api_key_path(cfg)
    certs._write_private(path, (token(cfg, API_KEY_PERMISSIONS, ttl=API_KEY_TTL) + "\n").encode())
    return path


def client_lines(cfg: StackSettings) -> list[str]:
    """What ``up --secure`` prints for the real server: one comment and one export."""
    env = " ".join(f"{k}={v}" for k, v in client_env(cfg).items())
    return [
        "# Temporal (the real server: TLS, client certificate, JWT for `default`, a week)",
        f"export {env}",
    ]


def tls_config(cfg: StackSettings) -> Any:
    """The SDK's ``TLSConfig`` with the stack's CA and client certificate."""
    from temporalio.service import TLSConfig

    cert = client_cert(cfg)
    return TLSConfig(
        server_root_ca_cert=cert.ca.read_bytes(),
        client_cert=cert.cert.read_bytes(),
        client_private_key=cert.key.read_bytes(),
        domain=SERVER_NAME,
    )


async def admin_client(cfg: StackSettings, namespace: str = "default") -> Any:
    """A client of the stack's own, as :data:`SYSTEM_ADMIN` (registers namespaces and search
    attributes); the token lives ten minutes and is never written down."""
    from temporalio.client import Client

    return await Client.connect(
        f"{HOST}:{cfg.temporal_port}",
        namespace=namespace,
        tls=tls_config(cfg),
        api_key=token(cfg, [SYSTEM_ADMIN], ttl=dt.timedelta(minutes=10)),
    )


def handshake(cfg: StackSettings) -> bool:
    """A health check over mutual TLS (health checks need no token)."""
    import asyncio

    async def go() -> bool:
        try:
            client = await asyncio.wait_for(admin_client(cfg), 5)
            return await asyncio.wait_for(client.service_client.check_health(), 5)
        except Exception:
            return False

    return asyncio.run(go())
