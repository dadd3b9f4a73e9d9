"""Throw-away PEM files for the settings tests: a CA, and a client certificate and key
signed by it (the key plain or encrypted). Unit tests load them into real SSL contexts
and TLSConfigs; no server is involved."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

KEY_PASSWORD = "key-pass-7f3a"


@dataclass(frozen=True)
class Material:
    ca: Path
    cert: Path
    key: Path
    encrypted_key: Path
    combined: Path  # certificate and key in one file
    other_key: Path  # a key that does not match ``cert``


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _key_pem(key: ec.EllipticCurvePrivateKey, password: str | None = None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode())
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )


def make(folder: Path) -> Material:
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("unit test CA"))
        .issuer_name(_name("unit test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("ingest"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .sign(ca_key, hashes.SHA256())
    )
    m = Material(
        ca=folder / "ca.pem",
        cert=folder / "client.pem",
        key=folder / "client.key",
        encrypted_key=folder / "client.enc.key",
        combined=folder / "client.combined.pem",
        other_key=folder / "other.key",
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    m.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    m.cert.write_bytes(cert_pem)
    m.key.write_bytes(_key_pem(key))
    m.encrypted_key.write_bytes(_key_pem(key, KEY_PASSWORD))
    m.combined.write_bytes(cert_pem + _key_pem(key))
    m.other_key.write_bytes(_key_pem(ec.generate_private_key(ec.SECP256R1())))
    return m
