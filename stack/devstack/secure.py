"""What ``ingest stack up --secure`` adds, and what a client needs to reach it.

* Kafka: three TLS listeners beside PLAINTEXT (which, with the controller listener,
  stays as it is, so every plain client keeps working): ``SCRAM`` (SASL_SSL,
  SCRAM-SHA-512, user :data:`SCRAM_USER`), ``MTLS`` (SSL, client certificate required)
  and ``OAUTH`` (SASL_SSL, OAUTHBEARER, Kafka's own *unsecured* JWT validator: any token
  with ``alg: none``, a ``sub`` and an unexpired ``exp`` is accepted; for tests only).
  :func:`kafka_properties` is what :mod:`devstack.kafka` adds to ``server.properties``.
* PostgreSQL: a second server, TLS only (:mod:`devstack.postgres_tls`).

Certificates come from the stack's CA (:class:`devstack.certs.Pki` in
``<INGEST_STACK_DIR>/pki``); generated passwords are files under
``<INGEST_STACK_DIR>/secure/`` (mode 0600), made once and kept. :func:`kafka_env` and
:func:`database_url` give the exact ``KAFKA_*`` and ``DATABASE_URL`` values a client
uses; :func:`client_lines` prints them after ``up --secure``.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from dataclasses import dataclass

from devstack.certs import CertFiles, Pki
from devstack.procs import port_open
from devstack.settings import HOST, StackSettings
from devstack.templates import template

SCRAM_USER = "ingest"  # the SCRAM-SHA-512 user the broker knows
SCRAM_MECHANISM = "SCRAM-SHA-512"
CLIENT_CN = "ingest-client"  # the mTLS client certificate's subject (Kafka principal)
OAUTH_SUBJECT = "ingest"  # the `sub` of the unsecured JWTs the OAUTH listener accepts
OAUTH_PROVIDER = "pipeline.kafka_oauth:UnsecuredJwtProvider"  # mints them
PG_USER = "ingest"  # the TLS PostgreSQL's role, owner of its `ingest` database


@dataclass(frozen=True)
class Listener:
    """One of the secure Kafka listeners: its name, protocol and port."""

    name: str  # as in listener.security.protocol.map (the property prefix lower-cased)
    protocol: str  # SSL or SASL_SSL
    port: int
    mechanism: str | None  # SASL mechanism, None for mTLS

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"


def kafka_listeners(cfg: StackSettings) -> tuple[Listener, ...]:
    return (
        Listener("SCRAM", "SASL_SSL", cfg.kafka_scram_port, SCRAM_MECHANISM),
        Listener("MTLS", "SSL", cfg.kafka_mtls_port, None),
        Listener("OAUTH", "SASL_SSL", cfg.kafka_oauth_port, "OAUTHBEARER"),
    )


def listener(cfg: StackSettings, name: str) -> Listener:
    return next(x for x in kafka_listeners(cfg) if x.name == name.upper())


def pki(cfg: StackSettings) -> Pki:
    return Pki(cfg.dir.resolve() / "pki")


def password(cfg: StackSettings, name: str) -> str:
    """The generated password ``name`` (e.g. ``kafka-scram-ingest``), made on first use."""
    path = cfg.dir.resolve() / "secure" / f"{name}.password"
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(24)  # letters, digits, - and _: no quoting anywhere
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(value + "\n")
    return value


def scram_password(cfg: StackSettings) -> str:
    return password(cfg, f"kafka-scram-{SCRAM_USER}")


def scram_fingerprint(cfg: StackSettings) -> str:
    """What the broker's SCRAM credential was last set from (user and password hash): a
    change (a new password file) makes :mod:`devstack.kafka` set it again."""
    digest = hashlib.sha256(scram_password(cfg).encode()).hexdigest()[:16]
    return f"{SCRAM_MECHANISM}:{SCRAM_USER}:{digest}\n"


def scram_credential(cfg: StackSettings) -> str:
    """The value of ``StorageTool format --add-scram`` (without the ``name=`` part it is
    ConfigCommand's ``--add-config``)."""
    return f"{SCRAM_MECHANISM}=[name={SCRAM_USER},password={scram_password(cfg)}]"


def broker_cert(cfg: StackSettings) -> CertFiles:
    return pki(cfg).server("kafka")


def client_cert(cfg: StackSettings) -> CertFiles:
    return pki(cfg).client(CLIENT_CN)


def kafka_listener_fields(cfg: StackSettings) -> tuple[str, str]:
    """The secure listeners for ``listeners``/``advertised.listeners`` and for
    ``listener.security.protocol.map``, each with a leading comma."""
    ls = kafka_listeners(cfg)
    return (
        "".join(f",{x.name}://{HOST}:{x.port}" for x in ls),
        "".join(f",{x.name}:{x.protocol}" for x in ls),
    )


def kafka_properties(cfg: StackSettings) -> str:
    """The broker properties of the secure listeners (certificates made if missing)."""
    cert = broker_cert(cfg)
    return template("kafka-secure.properties").format(
        keystore=cert.key_and_chain,
        ca=cert.ca,
        scram_mechanism=SCRAM_MECHANISM,
        scram_mechanism_lower=SCRAM_MECHANISM.lower(),
    )


def kafka_env(cfg: StackSettings, name: str) -> dict[str, str]:
    """The ``KAFKA_*`` variables of a client of listener ``name`` (SCRAM, MTLS, OAUTH)."""
    x = listener(cfg, name)
    env = {
        "KAFKA_BOOTSTRAP_SERVERS": x.address,
        "KAFKA_SECURITY_PROTOCOL": x.protocol,
        "KAFKA_SSL_CAFILE": str(pki(cfg).ca_cert),
    }
    if x.name == "SCRAM":
        env |= {
            "KAFKA_SASL_MECHANISM": SCRAM_MECHANISM,
            "KAFKA_SASL_USERNAME": SCRAM_USER,
            "KAFKA_SASL_PASSWORD": scram_password(cfg),
        }
    elif x.name == "MTLS":
        cert = client_cert(cfg)
        env |= {"KAFKA_SSL_CERTFILE": str(cert.cert), "KAFKA_SSL_KEYFILE": str(cert.key)}
    else:  # the pipeline's built-in provider of unsigned JWTs (pipeline/kafka_oauth.py)
        env |= {
            "KAFKA_SASL_MECHANISM": "OAUTHBEARER",
            "KAFKA_SASL_OAUTH_TOKEN_PROVIDER": OAUTH_PROVIDER,
            "KAFKA_SASL_OAUTH_SUBJECT": OAUTH_SUBJECT,
        }
    return env


def pg_password(cfg: StackSettings) -> str:
    return password(cfg, f"postgres-{PG_USER}")


def pg_superuser_password(cfg: StackSettings) -> str:
    return password(cfg, "postgres-postgres")


def database_url(cfg: StackSettings, user: str = PG_USER, database: str = "ingest") -> str:
    """The TLS PostgreSQL's DSN: ``sslmode=verify-full`` against the stack's CA."""
    pw = pg_password(cfg) if user == PG_USER else pg_superuser_password(cfg)
    return (
        f"postgresql://{user}:{pw}@{HOST}:{cfg.pg_tls_port}/{database}"
        f"?sslmode=verify-full&sslrootcert={pki(cfg).ca_cert}"
    )


def client_lines(cfg: StackSettings) -> list[str]:
    """``export`` lines for each secured server, as ``up --secure`` prints them."""
    out = []
    for x in kafka_listeners(cfg):
        env = " ".join(f"{k}={v}" for k, v in kafka_env(cfg, x.name).items())
        out.append(f"# Kafka {x.name} ({x.protocol}{f' {x.mechanism}' if x.mechanism else ''})")
        out.append(f"export {env}")
    out.append("# PostgreSQL (TLS, verify-full)")
    out.append(f"export DATABASE_URL='{database_url(cfg)}'")
    return out


def kafka_listening(cfg: StackSettings) -> bool:
    """Something listens on every secure Kafka port (cheap: no handshake)."""
    return all(port_open(HOST, x.port) for x in kafka_listeners(cfg))


def listeners_summary(cfg: StackSettings) -> str:
    """``(+ SCRAM 127.0.0.1:9192; MTLS ...; OAUTH ...)`` for ``up`` and ``status``."""
    return "(+ " + "; ".join(f"{x.name} {x.address}" for x in kafka_listeners(cfg)) + ")"
