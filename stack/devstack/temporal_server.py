"""The real Temporal server in the local stack (``INGEST_STACK_TEMPORAL=server``).

What users deploy, on this machine: ``go.temporal.io/server`` (built once by
:mod:`devstack.temporal_build`) with both stores on the stack's PostgreSQL, in
two databases of its own (``temporal`` and ``temporal_visibility``), with
``INGEST_STACK_TEMPORAL_SHARDS`` history shards (default 4), in one of two shapes:

* ``single``: one process runs frontend, history, matching and the internal worker;
* ``split``: one process per service, with ``INGEST_STACK_TEMPORAL_HISTORY_HOSTS``
  (default 2) history processes, so a dead history host's shards really move.

Every ``ensure()`` brings the schemas up to date with the sql tool (idempotent, well
under a second when current), writes each process's config and the stack's dynamic
config (``templates/temporal-dynamic-config.yaml``), starts what is not running,
and, once the frontend serves, registers the ``default`` namespace (24 h retention,
as on the dev server) and the pipeline's search attributes. With ``INGEST_STACK_TRACING``,
its processes start with the OTLP variables of :func:`devstack.jaeger.server_otel_env`
and export their own spans to the stack's Jaeger.

Ports derive from ``INGEST_STACK_TEMPORAL_PORT`` (``P``, default 7233), as in the
server's own development configs: frontend ``P`` (HTTP ``P+10``), history ``P+1``
(more history hosts ``P+3``, ``P+4``, ``P+5``), matching ``P+2``, worker ``P+6``;
each membership port is its gRPC port minus 300; each process's Prometheus metrics
are on ``P+2000`` onwards (frontend first), for the benchmarks' per-run figures.

Secured (``INGEST_STACK_SECURE``, ``up --secure``; :mod:`devstack.temporal_secure`): TLS
and required client certificates on the frontend, internode mutual TLS, the JWT
authorizer and claim mapper, an internal frontend on ``P+8`` for the server's own calls,
and the JWKS served on ``P+12``. The web UI stays off there: its calls would need a
JWT, which ui-server takes only from an OIDC login.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from urllib.parse import unquote, urlsplit

import yaml

from devstack import temporal_secure
from devstack.jaeger import server_otel_env
from devstack.postgres import Postgres
from devstack.procs import Proc, StackError, port_open, port_owner, wait_for
from devstack.service import Service
from devstack.settings import HOST, StackSettings
from devstack.templates import template
from devstack.temporal import _temporal_handshake
from devstack.temporal_build import ServerBinaries, ensure_binaries, ensure_ui

SCHEMAS = ("postgresql/v12/temporal", "postgresql/v12/visibility")  # embedded in the sql tool


def databases(cfg: StackSettings) -> dict[str, str]:
    """``{database: embedded schema}``: the default store's, then visibility's."""
    name = cfg.temporal_database
    return {name: SCHEMAS[0], f"{name}_visibility": SCHEMAS[1]}


NAMESPACE = "default"
# The dev server's retention for `default`, which docs/router.md's ledger reasoning assumes.
RETENTION = timedelta(hours=24)
PROC_PREFIX = "temporal-"  # pid files run/temporal-*.pid (the dev server's is run/temporal.pid)
UI_PROC = "temporal-ui"  # the web UI's process, beside the server's (any shape)


@dataclass(frozen=True)
class ServerProc:
    """One server process: which services it runs, on which ports."""

    name: str  # e.g. "temporal-history-2"; its pid file and log are named after it
    services: tuple[str, ...]
    history_index: int  # which history ports it takes (0: P+1)
    metrics_port: int


def _history_port(base: int, index: int) -> int:
    return base + 1 if index == 0 else base + 2 + index


def port_offsets(cfg: StackSettings) -> list[int]:
    """Every port the configured shape listens on, as offsets of ``temporal_port``."""
    p = cfg.temporal_port
    grpc = [p, p + 2, p + 6] + [_history_port(p, i) for i in range(cfg.temporal_history_hosts)]
    ports = grpc + [g - 300 for g in grpc] + [p + 10] + [sp.metrics_port for sp in plan(cfg)]
    extra = temporal_secure.port_offsets() if cfg.secure else []
    return sorted([port - p for port in ports] + extra)


def grpc_port(cfg: StackSettings, proc: ServerProc) -> int:
    """The gRPC port of the first service of ``proc`` (the one that shows it is up)."""
    p = cfg.temporal_port
    first = proc.services[0]
    if first == "history":
        return _history_port(p, proc.history_index)
    return {"frontend": p, "matching": p + 2, "worker": p + 6}[first]


def plan(cfg: StackSettings) -> list[ServerProc]:
    """The processes of the configured shape, history first (the frontend needs it)."""
    p = cfg.temporal_port
    # Secured, the internal frontend (the server's own way in) runs beside the frontend.
    front = ("frontend", "internal-frontend") if cfg.secure else ("frontend",)
    if cfg.temporal_shape == "single":
        services = (*front, "history", "matching", "worker")
        return [ServerProc("temporal-server", services, 0, p + 2000)]
    procs = [
        ServerProc(f"temporal-history-{i + 1}", ("history",), i, p + 2001 + i)
        for i in range(cfg.temporal_history_hosts)
    ]
    procs.append(ServerProc("temporal-matching", ("matching",), 0, p + 2005))
    procs.append(ServerProc("temporal-frontend", front, 0, p + 2000))
    procs.append(ServerProc("temporal-worker", ("worker",), 0, p + 2006))
    return procs


def _rpc(grpc: int, **extra: int) -> dict[str, object]:
    return {
        "rpc": {"grpcPort": grpc, "membershipPort": grpc - 300, "bindOnLocalHost": True, **extra}
    }


def server_config(
    cfg: StackSettings,
    proc: ServerProc,
    pg_url: str,
    dynamic: Path,
    secure: temporal_secure.SecureFiles | None = None,
) -> dict:
    """The server config of one process (the module's development-postgres12.yaml, trimmed);
    with ``secure``, TLS, the JWT authorizer and the internal frontend as well."""
    p = cfg.temporal_port
    url = urlsplit(pg_url)

    def store(db: str, conns: int) -> dict[str, object]:
        return {
            "sql": {
                "pluginName": "postgres12",
                "databaseName": db,
                "connectAddr": f"{url.hostname or HOST}:{url.port or 5432}",
                "connectProtocol": "tcp",
                "user": unquote(url.username or "postgres"),
                "password": unquote(url.password or ""),
                "maxConns": conns,
                "maxIdleConns": conns,
                "maxConnLifetime": "1h",
            }
        }

    conf: dict = {
        "log": {"stdout": True, "level": "warn"},
        "persistence": {
            "defaultStore": "postgres-default",
            "visibilityStore": "postgres-visibility",
            "numHistoryShards": cfg.temporal_shards,
            "datastores": {
                # The split shape holds about 90 connections in all; the stack's
                # PostgreSQL allows 300 (stack/devstack/postgres.py).
                "postgres-default": store(cfg.temporal_database, 16),
                "postgres-visibility": store(f"{cfg.temporal_database}_visibility", 4),
            },
        },
        "global": {
            "membership": {"maxJoinDuration": "30s", "broadcastAddress": HOST},
            "metrics": {
                "prometheus": {
                    "framework": "tally",
                    "timerType": "histogram",
                    "listenAddress": f"{HOST}:{proc.metrics_port}",
                }
            },
        },
        "services": {
            "frontend": _rpc(p, httpPort=p + 10),
            "history": _rpc(_history_port(p, proc.history_index)),
            "matching": _rpc(p + 2),
            "worker": _rpc(p + 6),
        },
        "clusterMetadata": {
            "enableGlobalNamespace": False,
            "failoverVersionIncrement": 10,
            "masterClusterName": "active",
            "currentClusterName": "active",
            "clusterInformation": {
                "active": {
                    "enabled": True,
                    "initialFailoverVersion": 1,
                    "rpcName": "frontend",
                    "rpcAddress": f"{HOST}:{p}",
                }
            },
        },
        "dcRedirectionPolicy": {"policy": "noop"},
        "dynamicConfigClient": {"filepath": str(dynamic), "pollInterval": "10s"},
    }
    if secure is not None:
        conf["global"].update(temporal_secure.server_security(cfg, secure))
        conf["services"]["internal-frontend"] = _rpc(temporal_secure.internal_frontend_port(cfg))
    return conf


def dynamic_config(cfg: StackSettings) -> dict[str, list[dict[str, object]]]:
    """The stack's dynamic config file, with ``INGEST_STACK_TEMPORAL_DYNAMIC_CONFIG``'s
    pairs on top (the same setting the dev server takes as ``--dynamic-config-value``)."""
    values: dict[str, list[dict[str, object]]] = yaml.safe_load(
        template("temporal-dynamic-config.yaml")
    )
    for pair in cfg.temporal_dynamic_config:
        key, _, value = pair.partition("=")
        values[key.strip()] = [{"value": json.loads(value)}]
    return values


def ui_config(cfg: StackSettings) -> dict[str, object]:
    """The UI server's config: the frontend's address, its own port, no auth (loopback)."""
    return {
        "temporalGrpcAddress": f"{HOST}:{cfg.temporal_port}",
        "host": HOST,
        "port": cfg.temporal_ui_port,
        "enableUi": True,
        "defaultNamespace": NAMESPACE,
        "refreshInterval": "1m",
        "cors": {"allowOrigins": [f"http://{HOST}:{cfg.temporal_ui_port}"]},
        "auth": {"enabled": False},
    }


@dataclass
class TemporalServer(Service):
    """The real server's processes of the configured shape (see the module docstring),
    with ``ensure``, ``stop`` and ``answering`` as every service of the stack has."""

    name = "temporal-server"
    port_setting = "temporal_port"

    def handshake(self) -> bool:
        if self.secured():
            return temporal_secure.handshake(self.cfg)
        return _temporal_handshake(self.address)

    def secured(self) -> bool:
        """Whether the running frontend was started secured (its config says); when none
        runs, whether ``INGEST_STACK_SECURE`` asks for it."""
        running = self.running_secured()
        return self.cfg.secure if running is None else running

    def running_secured(self) -> bool | None:
        for sp, proc in self.procs():
            if "frontend" in sp.services and proc.pid() is not None:
                try:
                    conf = yaml.safe_load((self.home / f"{sp.name}.yaml").read_text())
                except OSError:
                    return None
                return "authorization" in conf.get("global", {})
        return None

    def procs(self) -> list[tuple[ServerProc, Proc]]:
        root = self.cfg.dir.resolve()
        return [(sp, Proc(root, sp.name)) for sp in plan(self.cfg)]

    def started_procs(self) -> list[Proc]:
        """Every server process this stack started, whatever the shape now configured."""
        root = self.cfg.dir.resolve()
        names = sorted(
            (p.name.removesuffix(".pid") for p in (root / "run").glob(f"{PROC_PREFIX}*.pid")),
            key=lambda n: (n == temporal_secure.JWKS_PROC, n),  # the JWKS server stops last
        )
        return [Proc(root, n) for n in names]

    def binaries(self) -> ServerBinaries:
        return ensure_binaries(
            self.cfg.temporal_server_cache,
            self.cfg.temporal_server_version,
            log=self.cfg.dir.resolve() / "logs" / "temporal-build.log",
        )

    def ensure(self) -> str:
        highest = self.cfg.temporal_port + max(port_offsets(self.cfg)) - 2000  # gRPC/HTTP
        if highest - 300 > 32767 or self.cfg.temporal_port - 300 < 1:
            raise StackError(
                f"INGEST_STACK_TEMPORAL_PORT={self.cfg.temporal_port}: the real server keeps "
                "each membership port (its gRPC port - 300) in a PostgreSQL smallint, so "
                "ports must lie between 301 and 33000"
            )
        bins = self.binaries()
        pg_url = Postgres(self.cfg).url
        self._check_shards()
        setup_schemas(bins, pg_url, databases(self.cfg))
        dynamic = self.home / "dynamicconfig.yaml"
        self.home.mkdir(parents=True, exist_ok=True)
        dynamic.write_text(yaml.safe_dump(dynamic_config(self.cfg), sort_keys=False))
        procs = self.procs()
        running = [proc for _, proc in procs if proc.pid() is not None]
        aux = {UI_PROC, temporal_secure.JWKS_PROC}
        others = {p.name for p in self.started_procs()} - {sp.name for sp, _ in procs} - aux
        if others:
            raise StackError(
                f"the real server runs in another shape ({', '.join(sorted(others))}); "
                f"INGEST_STACK_TEMPORAL_SHAPE={self.cfg.temporal_shape}: "
                "run `ingest stack down` first"
            )
        if running and self.running_secured() not in (None, self.cfg.secure):
            raise StackError(
                "the real server runs "
                f"{'secured' if not self.cfg.secure else 'without --secure'}; "
                "run `ingest stack down` first"
            )
        secure = temporal_secure.ensure_files(self.cfg) if self.cfg.secure else None
        if secure is not None:
            temporal_secure.ensure_jwks_server(self.cfg, secure)
        if self.answering() and not running:
            raise StackError(
                f"{self.address} is served by a process this stack did not start as the real "
                "server (the dev server?): run `ingest stack down` first"
            )
        for sp, proc in procs:
            if proc.pid() is not None:
                continue
            conf = self.home / f"{sp.name}.yaml"
            conf.write_text(
                yaml.safe_dump(
                    server_config(self.cfg, sp, pg_url, dynamic, secure), sort_keys=False
                )
            )
            no_auth = [] if secure else ["--allow-no-auth"]
            argv = [str(bins.server), "--config-file", str(conf), *no_auth, "start"]
            for svc in sp.services:
                argv += ["--service", svc]
            proc.start(argv, env=server_otel_env(self.cfg))  # spans to Jaeger when tracing
            # One at a time: processes that first meet a fresh database together race
            # to write its cluster metadata, and the losers exit.
            port = grpc_port(self.cfg, sp)
            wait_for(lambda port=port: port_open(HOST, port), sp.name, proc, 60)
        frontend = next(proc for sp, proc in procs if "frontend" in sp.services)
        wait_for(self.answering, "Temporal server", frontend, 120)
        owner = port_owner(self.cfg.temporal_port)
        if owner is not None and owner != frontend.pid():
            raise StackError(
                f"port {self.cfg.temporal_port} answers, but from pid {owner}, not from the "
                f"frontend this stack started (pid {frontend.pid()}); see {frontend.logfile}"
            )
        asyncio.run(_prepare(self.cfg, NAMESPACE))
        if self.cfg.temporal_ui and not self.cfg.secure:
            self._ensure_ui()
        return "already running" if len(running) == len(procs) else "started"

    def _ensure_ui(self) -> None:
        """The web UI on ``temporal_ui_port``, pointed at the frontend (as the dev server's)."""
        proc = Proc(self.cfg.dir.resolve(), UI_PROC)
        if proc.pid() is not None:
            return
        binary = ensure_ui(
            self.cfg.temporal_server_cache,
            self.cfg.temporal_ui_version,
            log=self.cfg.dir.resolve() / "logs" / "temporal-build.log",
        )
        root = self.home / "ui"
        (root / "config").mkdir(parents=True, exist_ok=True)
        (root / "config" / "development.yaml").write_text(yaml.safe_dump(ui_config(self.cfg)))
        proc.start([str(binary), "--root", str(root), "--env", "development", "start"])
        port = self.cfg.temporal_ui_port
        wait_for(lambda: port_open(HOST, port), "the Temporal UI", proc, 30)

    def _check_shards(self) -> None:
        """The shard count is fixed when the database is first set up; say so, not fail later."""
        marker = self.home / f"{self.cfg.temporal_database}.shards"
        if marker.exists() and int(marker.read_text()) != self.cfg.temporal_shards:
            raise StackError(
                f"INGEST_STACK_TEMPORAL_SHARDS={self.cfg.temporal_shards}, but the stack's "
                f"Temporal databases were set up with {marker.read_text().strip()} shards; a "
                "shard count cannot change: set INGEST_STACK_TEMPORAL_DATABASE to another "
                "name (new databases), or drop the old ones"
            )
        self.home.mkdir(parents=True, exist_ok=True)
        marker.write_text(str(self.cfg.temporal_shards))

    def stop(self) -> bool:
        procs = self.started_procs()
        # Frontend first (no new requests), history last (it flushes shard state).
        procs.sort(key=lambda p: ("history" in p.name, p.name))
        stopped = [p.stop(timeout=20) for p in procs]
        return any(stopped)

    def summary(self) -> str:
        n = len(plan(self.cfg))
        secured = self.secured()
        ui = f", UI http://{HOST}:{self.cfg.temporal_ui_port}" if self.cfg.temporal_ui else ""
        if secured:
            ui = ", TLS, client certificates required, JWT authorizer; no UI"
        return (
            f"{self.address} (server {self.cfg.temporal_server_version}, "
            f"{self.cfg.temporal_shards} shards, {self.cfg.temporal_shape}: "
            f"{n} process{'es' if n > 1 else ''}{ui})"
        )


def _sql(bins: ServerBinaries, pg_url: str, db: str, *args: str) -> None:
    url = urlsplit(pg_url)
    argv = [
        str(bins.sql), "--plugin", "postgres12", "--endpoint", url.hostname or HOST,
        "--port", str(url.port or 5432), "--user", unquote(url.username or "postgres"),
        "--database", db,
    ]  # fmt: skip
    if url.password:
        argv += ["--password", unquote(url.password)]
    res = subprocess.run([*argv, *args], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        last = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["no output"]
        raise StackError(f"temporal-sql-tool {' '.join(args)} on {db} failed: {last[0]}")


def setup_schemas(bins: ServerBinaries, pg_url: str, dbs: dict[str, str]) -> None:
    """Create the databases and bring their schemas up to date; a no-op when current."""
    for db, schema in dbs.items():
        if not _database_exists(pg_url, db):
            _sql(bins, pg_url, db, "create-database")
            _sql(bins, pg_url, db, "setup-schema", "-v", "0.0")
        _sql(bins, pg_url, db, "update-schema", "--schema-name", schema)


def _database_exists(pg_url: str, db: str) -> bool:
    import asyncpg

    async def go() -> bool:
        conn = await asyncpg.connect(pg_url, timeout=10)
        try:
            return bool(await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", db))
        finally:
            await conn.close()

    return asyncio.run(go())


async def _prepare(cfg: StackSettings, namespace: str) -> None:
    """A fresh server has no ``default`` namespace (the dev server makes one)."""
    from temporalio.client import Client

    from pipeline.temporal_setup import prepare_namespace

    if cfg.secure:
        client = await temporal_secure.admin_client(cfg, namespace)
    else:
        client = await Client.connect(f"{HOST}:{cfg.temporal_port}", namespace=namespace)
    await prepare_namespace(client, namespace, RETENTION, "the local stack's namespace")
