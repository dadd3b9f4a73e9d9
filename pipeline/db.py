"""PostgreSQL: connection pools and the versioned migration runner.

Migrations are the ``schemas/migrations/NNNN_name.sql`` files, applied in order,
each in its own transaction, recorded in ``schema_migrations``. A session-level
advisory lock serialises concurrent ``ingest migrate`` runs (several replicas
starting at once). A small runner rather than a migration framework: the
Python tools (alembic, yoyo) want a sync driver and an ORM or DSN juggling,
while plain SQL files plus ~40 lines here keep one driver (asyncpg).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
from collections.abc import Mapping
from importlib import resources
from urllib.parse import unquote, urlsplit

import asyncpg

from pipeline.settings import COMMAND_TIMEOUT, ConfigError

log = logging.getLogger(__name__)

_LOCK_KEY = 0x1A6E57  # arbitrary, fixed: the advisory lock id for migrations


_SECRET_KEYS = ("password", "sslpassword")
# keyword/value DSNs ("host=h password='a b'"): a quoted value may hold blanks and \'
_KV_SECRET = re.compile(r"(\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def _is_url(dsn: str) -> bool:
    return "://" in dsn


def _query_items(query: str) -> list[tuple[str, str, str]]:
    """(raw item, decoded key, raw value) of each ``&``-separated query item."""
    out = []
    for item in query.split("&"):
        key, _, value = item.partition("=")
        out.append((item, unquote(key).lower(), value))
    return out


def redact(url: str) -> str:
    """A DSN safe to log: every password replaced by ``***``.

    The password in the authority (``postgresql://u:pw@h/db``), ``password`` and
    ``sslpassword`` query parameters (``postgresql://u@h/db?password=pw``), and the same
    keywords in a keyword/value DSN (``host=h password=pw``).
    """
    if not _is_url(url):
        return _KV_SECRET.sub(r"\1***", url)
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        userinfo, _, hosts = netloc.rpartition("@")
        user = userinfo.partition(":")[0]
        netloc = f"{user}:***@{hosts}"
    query = (
        "&".join(
            f"{item.partition('=')[0]}=***" if key in _SECRET_KEYS else item
            for item, key, _ in _query_items(parts.query)
        )
        if parts.query
        else parts.query
    )
    return parts._replace(netloc=netloc, query=query).geturl()


def has_password(url: str) -> bool:
    """The DSN carries a password (or a client key's ``sslpassword``)."""
    if not _is_url(url):
        return _KV_SECRET.search(url) is not None
    parts = urlsplit(url)
    if parts.password:
        return True
    return any(key in _SECRET_KEYS for _, key, _ in _query_items(parts.query) if parts.query)


def refuse_password_on_command_line(url: str | None, flag: str = "--database-url") -> None:
    """``ConfigError`` when a DSN given as a flag carries a password: the command line
    is visible to every user of the host (``ps``, ``/proc/*/cmdline``) and kept in shell
    history."""
    if url is not None and has_password(url):
        raise ConfigError(
            f"{flag} carries a password, which `ps` and shell history would show: give the"
            " DSN in DATABASE_URL, or the password in ~/.pgpass (PGPASSFILE) or PGPASSWORD"
        )


_VERIFYING = ("verify-ca", "verify-full")


def _hosts(url: str, environ: Mapping[str, str]) -> list[str]:
    parts = urlsplit(url)
    spec = parts.netloc.rpartition("@")[2]
    query = {key: unquote(value) for _, key, value in _query_items(parts.query) if parts.query}
    spec = spec or query.get("host", "") or environ.get("PGHOST", "")
    hosts = []
    for item in spec.split(","):
        item = unquote(item.strip())
        if item.startswith("["):
            hosts.append(item[1 : item.find("]")])
        elif item.startswith("/"):
            hosts.append(item)
        else:
            hosts.append(item.partition(":")[0])
    return [h for h in hosts if h]


def _is_local(host: str) -> bool:
    if host.startswith("/") or host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def tls_warning(url: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """One line when the DSN reaches a server off this host without verifying it:
    no ``sslmode`` (asyncpg's default is ``prefer``: no certificate check, and plaintext
    when the server offers no TLS) or one of ``disable``, ``allow``, ``prefer``,
    ``require``. ``PGSSLMODE`` counts when the DSN has no ``sslmode``, as in asyncpg.
    None when every host is loopback or a Unix socket, or the mode verifies."""
    if not _is_url(url):
        return None
    hosts = _hosts(url, environ)
    if not hosts or all(_is_local(h) for h in hosts):
        return None
    parts = urlsplit(url)
    query = {key: unquote(value) for _, key, value in _query_items(parts.query) if parts.query}
    mode = query.get("sslmode") or environ.get("PGSSLMODE")
    if mode in _VERIFYING:
        return None
    said = f"sslmode={mode}" if mode else "no sslmode (asyncpg's default is prefer)"
    risk = (
        "the server's certificate is not verified"
        if mode == "require"
        else "the connection is not verified and may be plaintext"
    )
    return (
        f"DATABASE_URL reaches {','.join(hosts)} with {said}: {risk}; add"
        " sslmode=verify-full&sslrootcert=/path/to/ca.pem (docs/security.md#postgresql)"
    )


def migrations() -> list[tuple[str, str]]:
    """(version, sql) pairs in order."""
    folder = resources.files("schemas") / "migrations"
    files = sorted((p for p in folder.iterdir() if p.name.endswith(".sql")), key=lambda p: p.name)
    return [(p.name.removesuffix(".sql"), p.read_text()) for p in files]


async def migrate(conn: asyncpg.Connection) -> list[str]:
    """Apply pending migrations; returns the versions applied (empty when up to date)."""
    applied: list[str] = []
    await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
    try:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        for version, sql in migrations():
            if version in done:
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute("INSERT INTO schema_migrations (version) VALUES ($1)", version)
            log.info("applied migration %s", version)
            applied.append(version)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)
    return applied


class SchemaBehind(ConfigError):
    """The database lacks migrations this build needs: fatal at start-up (exit 2, one
    line with the fix, as every ConfigError), instead of a query failing later on a
    missing table (``UndefinedTableError``)."""

    def __init__(self, url: str, pending: list[str]) -> None:
        self.pending = pending
        some = ", ".join(pending[:3]) + (
            f" and {len(pending) - 3} more" if len(pending) > 3 else ""
        )
        super().__init__(
            f"the database at DATABASE_URL={redact(url)} lacks {len(pending)} migration(s)"
            f" this build needs ({some}): run `ingest migrate` first (`make run` does)"
        )


async def pending(conn: asyncpg.Connection | asyncpg.Pool) -> list[str]:
    """The migrations of this build not applied to the database (all of them on an empty
    one). Versions applied that this build does not know (a newer build migrated) are
    fine: migrations only add."""
    try:
        rows = await conn.fetch("SELECT version FROM schema_migrations")
    except asyncpg.UndefinedTableError:
        rows = []
    done = {r["version"] for r in rows}
    return [version for version, _ in migrations() if version not in done]


# A retention delete may remove a day's rows of a busy table in one statement.
PRUNE_TIMEOUT = 600.0
# A session that holds a lock (the relay's outbox lock) must not outlive its client by
# the kernel's default two hours when the client vanishes (a half-open link, a host
# gone): the server probes an idle link after 30 s and drops it after 3 lost probes.
# Session GUCs any user may set; not for a pool (a PgBouncer may refuse unknown startup
# parameters), only for a direct session.
KEEPALIVES = {
    "tcp_keepalives_idle": "30",
    "tcp_keepalives_interval": "10",
    "tcp_keepalives_count": "3",
}


async def connect(
    url: str,
    timeout: float = 10,
    command_timeout: float | None = None,
    server_settings: dict[str, str] | None = None,
) -> asyncpg.Connection:
    return await asyncpg.connect(
        url, timeout=timeout, command_timeout=command_timeout, server_settings=server_settings
    )


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Release a pooled connection without asyncpg's reset statement (advisory unlock,
    ``CLOSE ALL``, ``UNLISTEN *``, ``RESET ALL``): the pipeline leaves no session state
    on pooled connections (``migrate`` locks on a connection of its own), so that was
    one round trip per statement for nothing. asyncpg still rolls back an open
    transaction and drops listeners on release."""


async def create_pool(
    url: str, min_size: int = 1, max_size: int = 10, command_timeout: float = COMMAND_TIMEOUT
) -> asyncpg.Pool:
    """``timeout``: 10 s to connect; ``command_timeout``: the default bound of every
    statement (a half-open link answers nothing: without it a query waits until the link
    is closed, which a dropped packet may never do)."""
    pool = await asyncpg.create_pool(
        url,
        min_size=min_size,
        max_size=max_size,
        timeout=10,
        command_timeout=command_timeout,
        reset=_keep_session,
    )
    assert pool is not None
    return pool


async def prune_older_than(
    conn: asyncpg.Pool | asyncpg.Connection, delete_sql: str, retention_days: float, *args: object
) -> int:
    """Run ``delete_sql``, a DELETE whose ``$1`` is the retention in seconds (``args``
    follow as ``$2``...), unless ``retention_days`` is 0 (keep forever); the rows deleted.

    The one retention rule of the ledger, the flow decisions and windows, and the outbox.
    """
    if retention_days <= 0:
        return 0
    status = await conn.execute(delete_sql, retention_days * 86400, *args, timeout=PRUNE_TIMEOUT)
    return int(status.split()[-1])
