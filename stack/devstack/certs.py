"""The secured stack's certificate authority and certificates (``ingest stack up --secure``).

One CA per stack folder (``<INGEST_STACK_DIR>/pki``), made once and kept: every secured
server (Kafka's TLS listeners, the real Temporal server's frontend, PostgreSQL) gets a
server certificate for ``127.0.0.1``/``localhost`` signed by it, and clients get client
certificates (mTLS) from it. Keys are unencrypted PKCS#8 PEM files, readable by their
owner only. Made with the PyCA ``cryptography`` library, not ``openssl`` calls.

Tests that need a *bad* certificate (expired, from another CA) ask :func:`issue` for
one with ``days``/``not_before`` set, or make a second :class:`Pki` in a temporary folder.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

LOCAL_NAMES = ("localhost", "127.0.0.1")


@dataclass(frozen=True)
class CertFiles:
    """A certificate and its key, as PEM files (``chain`` is cert then CA)."""

    cert: Path
    key: Path
    ca: Path

    @property
    def chain(self) -> Path:
        """The certificate followed by the CA's (what some servers want as one file)."""
        path = self.cert.with_suffix(".chain.pem")
        if not path.exists():
            path.write_bytes(self.cert.read_bytes() + self.ca.read_bytes())
        return path

    @property
    def key_and_chain(self) -> Path:
        """Key, certificate and CA in one PEM file (Kafka's ``ssl.keystore.type=PEM``)."""
        path = self.cert.with_suffix(".keystore.pem")
        if not path.exists():
            _write_private(path, self.key.read_bytes() + self.chain.read_bytes())
        return path


class Pki:
    """The CA in ``folder`` (made on first use) and the certificates it issues there."""

    def __init__(self, folder: Path, name: str = "ingest local stack CA") -> None:
        self.folder = folder
        self.name = name

    @property
    def ca_cert(self) -> Path:
        self._ensure_ca()
        return self.folder / "ca.pem"

    def server(self, name: str, hosts: tuple[str, ...] = LOCAL_NAMES) -> CertFiles:
        """A server certificate for ``hosts`` (DNS names and IP addresses), made once."""
        return self._issued(name, hosts, ExtendedKeyUsageOID.SERVER_AUTH)

    def client(self, name: str) -> CertFiles:
        """A client certificate whose subject CN is ``name`` (e.g. a Kafka principal)."""
        return self._issued(name, (), ExtendedKeyUsageOID.CLIENT_AUTH)

    def issue(
        self,
        name: str,
        hosts: tuple[str, ...] = LOCAL_NAMES,
        *,
        days: int = 825,
        not_before: dt.datetime | None = None,
        client: bool = False,
    ) -> CertFiles:
        """A new certificate every call (overwrites ``name``): for tests of bad ones,
        e.g. ``days=1, not_before=now - 10 days`` is expired."""
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        return self._make(name, hosts, usage, days, not_before)

    def _issued(self, name: str, hosts: tuple[str, ...], usage: x509.ObjectIdentifier) -> CertFiles:
        files = self._files(name)
        if files.cert.exists() and files.key.exists():
            return files
        return self._make(name, hosts, usage, 825, None)

    def _files(self, name: str) -> CertFiles:
        return CertFiles(self.folder / f"{name}.pem", self.folder / f"{name}.key", self.ca_cert)

    def _make(
        self,
        name: str,
        hosts: tuple[str, ...],
        usage: x509.ObjectIdentifier,
        days: int,
        not_before: dt.datetime | None,
    ) -> CertFiles:
        ca_key, ca_cert = self._ensure_ca()
        key = ec.generate_private_key(ec.SECP256R1())
        start = not_before or _now() - dt.timedelta(minutes=5)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(start + dt.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
        )
        if hosts:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([_general_name(h) for h in hosts]), critical=False
            )
        cert = builder.sign(ca_key, hashes.SHA256())
        files = self._files(name)
        for stale in (
            files.cert.with_suffix(".chain.pem"),
            files.cert.with_suffix(".keystore.pem"),
        ):
            stale.unlink(missing_ok=True)
        _write_private(files.key, _key_pem(key))
        files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return files

    def _ensure_ca(self) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        key_path, cert_path = self.folder / "ca.key", self.folder / "ca.pem"
        if key_path.exists() and cert_path.exists():
            key = serialization.load_pem_private_key(key_path.read_bytes(), None)
            assert isinstance(key, ec.EllipticCurvePrivateKey)
            return key, x509.load_pem_x509_certificate(cert_path.read_bytes())
        self.folder.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, self.name)])
        start = _now() - dt.timedelta(minutes=5)
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(start + dt.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .sign(key, hashes.SHA256())
        )
        _write_private(key_path, _key_pem(key))
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return key, cert


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
