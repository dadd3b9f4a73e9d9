"""Building the clients every process needs, with start-up errors that name the setting.

An unreachable broker, Temporal or database at start-up raises
:class:`Unreachable` whose message names the environment variable to fix.
"""

from __future__ import annotations

import asyncio
import logging
import re
from datetime import timedelta

import asyncpg
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from temporalio.client import Client
from temporalio.service import TLSConfig

from pipeline import codec, db, tracing
from pipeline.settings import (
    ConfigError,
    DatabaseSettings,
    KafkaSettings,
    Settings,
    TemporalSettings,
)
from schemas.errors import IngestError

log = logging.getLogger(__name__)


class Unreachable(IngestError):
    """A dependency did not answer at start-up."""

    retriable = True


def temporal_tls(cfg: TemporalSettings) -> bool | TLSConfig:
    """What ``Client.connect(tls=...)`` gets: False (plaintext), True (TLS with the
    system roots) or a :class:`TLSConfig` carrying the server name, the CA and the
    client certificate and key, each from its ``*_DATA`` or ``*_PATH`` setting.

    TLS is on when asked for or implied by an API key or any TLS option
    (:meth:`TemporalSettings.tls_enabled`); contradictions were refused at load.
    """
    if not cfg.tls_enabled():
        return False
    ca, cert, key = cfg.pem("server_ca_cert"), cfg.pem("client_cert"), cfg.pem("client_key")
    if cfg.tls_server_name is None and ca is None and cert is None:
        return True
    return TLSConfig(
        server_root_ca_cert=ca,
        domain=cfg.tls_server_name,
        client_cert=cert,
        client_private_key=key,
    )


async def temporal_client(
    cfg: TemporalSettings, timeout: float = 10, runtime: object | None = None
) -> Client:
    tls = temporal_tls(cfg)
    converter = codec.configured_converter()  # a bad INGEST_CODEC_* key: ConfigError, exit 2
    kwargs: dict[str, object] = {}
    if runtime is not None:
        kwargs["runtime"] = runtime
    try:
        client = await asyncio.wait_for(
            Client.connect(
                cfg.address,
                namespace=cfg.namespace,
                api_key=cfg.api_key.get_secret_value() if cfg.api_key else None,
                tls=tls,
                connect_timeout=timedelta(seconds=timeout),
                data_converter=converter,
                interceptors=tracing.temporal_interceptors(),
                **kwargs,  # type: ignore[arg-type]
            ),
            timeout + 2,
        )
    except Exception as exc:
        raise Unreachable(
            f"cannot reach Temporal at TEMPORAL_ADDRESS={cfg.address} "
            f"(namespace TEMPORAL_NAMESPACE={cfg.namespace}): {type(exc).__name__}: {exc}"
            + temporal_hint(cfg, str(exc))
        ) from None
    await _check_namespace(client, cfg, timeout)
    return client


def temporal_hint(cfg: TemporalSettings, text: str) -> str:
    """Which ``TEMPORAL_TLS_*`` setting a failed TLS connection points at, when a client
    certificate or a CA is configured ('' otherwise, or for any other failure).

    A server that refuses the client certificate does so after the client's side of a
    TLS 1.3 handshake: the client often sees only the connection closed (or a broken
    pipe, an EOF without close_notify), not the server's alert."""
    configured = ("client_cert_path", "client_cert_data", "server_ca_cert_path")
    if all(getattr(cfg, f"tls_{n}") is None for n in (*configured, "server_ca_cert_data")):
        return ""
    t = text.lower()
    if "notvalidforname" in t:
        return (
            "; the server's certificate does not carry the name this client expects: set"
            " TEMPORAL_TLS_SERVER_NAME to a name in it"
        )
    if "invalidcertificate" in t or "unknownissuer" in t:
        return (
            "; the server's certificate was not verified: TEMPORAL_TLS_SERVER_CA_CERT_PATH"
            " (or _DATA) must be the CA that signed it, TEMPORAL_TLS_SERVER_NAME a name in it"
        )
    ended = ("alert", "handshake", "close_notify", "closed", "broken pipe", "unexpectedeof")
    if any(s in t for s in (*ended, "connection reset", "connectionreset")):
        return (
            "; the server ended the TLS connection: it may refuse the client certificate"
            " of TEMPORAL_TLS_CLIENT_CERT_PATH (or _DATA) and TEMPORAL_TLS_CLIENT_KEY_PATH"
            " (none, expired, or of a CA it does not trust); check"
            " TEMPORAL_TLS_SERVER_CA_CERT_PATH and TEMPORAL_TLS_SERVER_NAME too"
        )
    return ""


async def _check_namespace(client: Client, cfg: TemporalSettings, timeout: float) -> None:
    """A namespace the server does not know fails at start-up, naming the setting.

    Afterwards a NOT_FOUND for the namespace is an outage of the server's own database
    (the starter retries it, ``pipeline.starter.outage``), never a reason to dead-letter.
    Any other answer (e.g. PERMISSION_DENIED for a key scoped to workflows) passes: the
    check only refuses what is certainly wrong.
    """
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
    from temporalio.service import RPCError, RPCStatusCode

    try:
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=cfg.namespace),
            timeout=timedelta(seconds=timeout),
        )
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise Unreachable(
                f"Temporal at TEMPORAL_ADDRESS={cfg.address} has no namespace "
                f"TEMPORAL_NAMESPACE={cfg.namespace}: register it, or name another"
            ) from None
        log.debug("namespace check of %s skipped: %s", cfg.namespace, exc)


async def db_pool(cfg: DatabaseSettings) -> asyncpg.Pool:
    """A pool on a database that answers and is migrated: :class:`Unreachable` when it
    does not answer, :class:`pipeline.db.SchemaBehind` when it lacks migrations."""
    url = cfg.url.get_secret_value()
    if warning := db.tls_warning(url):
        log.warning("%s", warning)
    try:
        pool = await db.create_pool(url, cfg.pool_min, cfg.pool_max, cfg.command_timeout)
    except Exception as exc:
        raise Unreachable(
            f"cannot reach PostgreSQL at DATABASE_URL={db.redact(url)}: {type(exc).__name__}: {exc}"
        ) from None
    try:
        if missing := await db.pending(pool):
            raise db.SchemaBehind(url, missing)
    except BaseException:
        await pool.close()
        raise
    return pool


async def check_kafka(cfg: KafkaSettings, timeout: float = 10) -> list[str]:
    """List topics; raises :class:`Unreachable` naming KAFKA_BOOTSTRAP_SERVERS, with the
    broker's last answer (aiokafka only logs it) and the setting it points at."""
    admin = AIOKafkaAdminClient(**cfg.client_kwargs())  # type: ignore[arg-type]
    causes = _BootstrapErrors()
    try:
        with causes:
            await asyncio.wait_for(admin.start(), timeout)
            return list(await asyncio.wait_for(admin.list_topics(), timeout))
    except Exception as exc:
        cause = causes.last
        said = f" (last error: {cause})" if cause else ""
        raise Unreachable(
            f"cannot reach Kafka at KAFKA_BOOTSTRAP_SERVERS={cfg.bootstrap_servers}: "
            f"{type(exc).__name__}: {exc}{said}{kafka_hint(f'{cause} {exc}', cfg)}"
        ) from None
    finally:
        await admin.close()


class _BootstrapErrors(logging.Handler):
    """While active, keeps the last warning or error aiokafka logs (the reason a connection
    failed: refused credentials, an unverified certificate, a closed connection), which
    its ``KafkaConnectionError`` ("Unable to bootstrap") does not carry."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last: str | None = None
        self._log = logging.getLogger("aiokafka")
        self._saved = (self._log.level, self._log.propagate)

    def emit(self, record: logging.LogRecord) -> None:
        self.last = record.getMessage()

    def __enter__(self) -> None:
        self._log.addHandler(self)
        if self._log.getEffectiveLevel() > logging.WARNING:  # silenced by the caller
            self._log.setLevel(logging.WARNING)
            self._log.propagate = False

    def __exit__(self, *exc: object) -> None:
        self._log.removeHandler(self)
        self._log.setLevel(self._saved[0])
        self._log.propagate = self._saved[1]


def kafka_hint(cause: str, cfg: KafkaSettings) -> str:
    """The settings a connection error points at, as a tail for its one line ('' if none)."""
    text = cause.lower()
    if "certificate_verify_failed" in text or "certificate verify failed" in text:
        if "expired" in text:
            return ": a certificate has expired (the broker's, or KAFKA_SSL_CERTFILE)"
        if "mismatch" in text:  # "Hostname mismatch", "IP address mismatch"
            return (
                ": the broker's certificate does not name the host dialed (its advertised"
                " listener; KAFKA_SSL_CHECK_HOSTNAME=false skips only this check)"
            )
        return ": the broker's certificate is not signed by KAFKA_SSL_CAFILE (or a system CA)"
    if "illegalsaslstate" in text:  # a SASL handshake on a listener without SASL
        return (
            f": this listener speaks no SASL; is KAFKA_SECURITY_PROTOCOL={cfg.security_protocol}"
            " right for it?"
        )
    if "unsupportedsaslmechanism" in text or "unsupported sasl" in text:
        return f": the broker does not offer KAFKA_SASL_MECHANISM={cfg.sasl_mechanism}"
    if cfg.sasl_mechanism == "OAUTHBEARER" and any(
        s in text for s in ("nodenotready", "metadata", "not ready")
    ):
        # aiokafka 0.14 takes the broker's OAUTHBEARER error challenge
        # ({"status":"invalid_token"}) for success; the next request then finds no broker.
        return (
            ": the broker most likely refused the token of KAFKA_SASL_OAUTH_TOKEN_PROVIDER"
            " (aiokafka 0.14 reports no OAUTHBEARER refusal: check the token's subject,"
            " expiry and the broker's validator)"
        )
    if "authentication" in text or ("sasl" in text and "fail" in text):
        if cfg.sasl_mechanism == "OAUTHBEARER":
            return ": the broker refused the token of KAFKA_SASL_OAUTH_TOKEN_PROVIDER"
        return ": check KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD (and KAFKA_SASL_MECHANISM)"
    if any(s in text for s in ("wrong_version_number", "wrong version number", "record layer")):
        return (
            f": KAFKA_SECURITY_PROTOCOL={cfg.security_protocol} uses TLS; is this listener"
            " plaintext?"
        )
    if re.search(r"(tlsv1\d?|sslv3) alert|certificate required", text):
        return ": the broker refused the TLS client certificate (KAFKA_SSL_CERTFILE/KEYFILE)"
    tls = cfg.security_protocol in ("SSL", "SASL_SSL")
    if tls and cfg.ssl_certfile is not None and ("closed" in text or "reset" in text):
        # TLS 1.3: the broker checks the client certificate after the client's handshake
        # ended, so a refusal shows as the connection closing on the first request.
        return (
            ": the broker closed the connection; it may refuse the client certificate"
            " KAFKA_SSL_CERTFILE (expired, or signed by a CA it does not trust)"
        )
    if cfg.security_protocol in ("PLAINTEXT", "SASL_PLAINTEXT") and "closed" in text:
        expects = "TLS or SASL" if cfg.security_protocol == "PLAINTEXT" else "TLS"
        return (
            f": the broker closed the connection; does this listener expect {expects}"
            f" (KAFKA_SECURITY_PROTOCOL={cfg.security_protocol})?"
        )
    return ""


async def routing_clients(cfg: Settings) -> tuple[Client, asyncpg.Pool]:
    """What routing events to runs needs (``ingest router``, ``ingest replay``): Kafka
    answering, then a Temporal client and a database pool, which the caller closes.
    Raises :class:`Unreachable` for the first of them that does not answer."""
    await check_kafka(cfg.kafka)
    client = await temporal_client(cfg.temporal)
    return client, await db_pool(cfg.database)


def topic_configs(replication_factor: int) -> dict[str, str]:
    """What every application topic is created with (see docs/kafka.md).

    ``min.insync.replicas`` is one less than the replication factor, at most 2:
    with 3 replicas an ``acks=all`` write is on 2 brokers before it is
    acknowledged and one broker may be down. Unclean leader election stays off,
    so an out-of-sync replica (one that may miss acknowledged writes) never leads.
    """
    return {
        "min.insync.replicas": str(max(1, min(2, replication_factor - 1))),
        "unclean.leader.election.enable": "false",
    }


async def ensure_topics(
    cfg: KafkaSettings,
    topics: list[str],
    partitions: int,
    replication_factor: int | None = None,
    configs: dict[str, str] | None = None,
) -> list[str]:
    """Create the topics that do not exist yet; returns those created.

    ``configs``: topic settings on top of :func:`topic_configs` (e.g. the relay's
    ``cleanup.policy: compact``).

    ``replication_factor`` defaults to the number of brokers, at most 3 (so 1 on
    the single-node stack, 3 on a cluster). A topic the broker refuses raises, its
    message naming ``KAFKA_CREATE_TOPICS=check`` when a managed cluster refused a
    setting or the principal may not create topics.

    With ``KAFKA_CREATE_TOPICS=check`` nothing is created: a missing topic raises
    :class:`MissingTopics` (a :class:`ConfigError`, one line naming them all).
    """
    from aiokafka.errors import TopicAlreadyExistsError, for_code

    admin = AIOKafkaAdminClient(**cfg.client_kwargs())  # type: ignore[arg-type]
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [t for t in topics if t not in existing]
        if not missing:
            return []
        if cfg.create_topics == "check":
            raise MissingTopics(missing)
        brokers = len((await admin.describe_cluster())["brokers"])
        rf = replication_factor or max(1, min(3, brokers))
        resp = await admin.create_topics(
            [
                NewTopic(t, partitions, rf, topic_configs={**topic_configs(rf), **(configs or {})})
                for t in missing
            ]
        )
        for topic, code, *rest in resp.topic_errors:
            if code and for_code(code) is not TopicAlreadyExistsError:
                hint = _MANAGED_HINT if code in _REFUSED_BY_POLICY else ""
                raise for_code(code)(f"creating topic {topic}: {rest[0] if rest else ''}{hint}")
        return missing
    finally:
        await admin.close()


# CLUSTER/TOPIC_AUTHORIZATION_FAILED, INVALID_REPLICATION_FACTOR, INVALID_CONFIG,
# POLICY_VIOLATION: what a managed cluster answers to a topic setting it does not allow
# (e.g. unclean.leader.election.enable on MSK Serverless) or to a principal without
# the right to create topics.
_REFUSED_BY_POLICY = frozenset({29, 31, 38, 40, 44})
_MANAGED_HINT = (
    " (a managed cluster may refuse this pipeline's topic settings or topic creation:"
    " create the topics yourself and set KAFKA_CREATE_TOPICS=check, docs/kafka.md)"
)


class MissingTopics(ConfigError):
    """``KAFKA_CREATE_TOPICS=check`` and topics the pipeline needs are not on the broker."""

    def __init__(self, missing: list[str]) -> None:
        self.missing = missing
        super().__init__(
            "KAFKA_CREATE_TOPICS=check: topics missing on the broker (or not visible to"
            f" this principal): {', '.join(missing)}: create them (docs/kafka.md)"
        )
