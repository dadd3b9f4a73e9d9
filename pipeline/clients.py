"""Building the clients every process needs, with start-up errors that name the setting.

An unreachable broker, Temporal or database at start-up raises
:class:`Unreachable` whose message names the environment variable to fix.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import asyncpg
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from temporalio.client import Client
from temporalio.service import TLSConfig

from pipeline import db, tracing
from pipeline.settings import DatabaseSettings, KafkaSettings, Settings, TemporalSettings
from schemas.converter import DATA_CONVERTER
from schemas.errors import IngestError

log = logging.getLogger(__name__)


class Unreachable(IngestError):
    """A dependency did not answer at start-up."""

    retriable = True


async def temporal_client(
    cfg: TemporalSettings, timeout: float = 10, runtime: object | None = None
) -> Client:
    tls: bool | TLSConfig = cfg.tls
    if cfg.tls_client_cert_path or cfg.tls_server_ca_cert_path:
        tls = TLSConfig(
            server_root_ca_cert=cfg.tls_server_ca_cert_path.read_bytes()
            if cfg.tls_server_ca_cert_path
            else None,
            client_cert=cfg.tls_client_cert_path.read_bytes() if cfg.tls_client_cert_path else None,
            client_private_key=cfg.tls_client_key_path.read_bytes()
            if cfg.tls_client_key_path
            else None,
        )
    elif cfg.api_key is not None and not cfg.tls:
        tls = True  # Temporal Cloud API keys require TLS
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
                data_converter=DATA_CONVERTER,
                interceptors=tracing.temporal_interceptors(),
                **kwargs,  # type: ignore[arg-type]
            ),
            timeout + 2,
        )
    except Exception as exc:
        raise Unreachable(
            f"cannot reach Temporal at TEMPORAL_ADDRESS={cfg.address} "
            f"(namespace TEMPORAL_NAMESPACE={cfg.namespace}): {type(exc).__name__}: {exc}"
        ) from None
    await _check_namespace(client, cfg, timeout)
    return client


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
    try:
        pool = await db.create_pool(url, cfg.pool_min, cfg.pool_max)
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
    """List topics; raises :class:`Unreachable` naming KAFKA_BOOTSTRAP_SERVERS."""
    admin = AIOKafkaAdminClient(**cfg.client_kwargs())  # type: ignore[arg-type]
    try:
        await asyncio.wait_for(admin.start(), timeout)
        return list(await asyncio.wait_for(admin.list_topics(), timeout))
    except Exception as exc:
        raise Unreachable(
            f"cannot reach Kafka at KAFKA_BOOTSTRAP_SERVERS={cfg.bootstrap_servers}: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    finally:
        await admin.close()


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
    the single-node stack, 3 on a cluster). A topic the broker refuses raises.
    """
    from aiokafka.errors import TopicAlreadyExistsError, for_code

    admin = AIOKafkaAdminClient(**cfg.client_kwargs())  # type: ignore[arg-type]
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [t for t in topics if t not in existing]
        if not missing:
            return []
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
                raise for_code(code)(f"creating topic {topic}: {rest[0] if rest else ''}")
        return missing
    finally:
        await admin.close()
