"""Jaeger in the local stack (``ingest stack up --tracing``): where the pipeline's spans go.

Jaeger ``v<INGEST_STACK_JAEGER_VERSION>`` (1.75.0), whose ``jaeger`` binary is Jaeger v2:
the all-in-one on the OpenTelemetry collector. It is built once from source into
``INGEST_STACK_JAEGER_CACHE/v<version>/jaeger`` (outside the checkout, like the real
Temporal server: :mod:`devstack.temporal_build`). ``go install ...@v1.75.0`` refuses the
module (its ``go.mod`` has ``replace`` directives), so the build is a throwaway module
that requires it as a tool: ``go mod init``, ``go get -tool``, ``go build``.

The stack runs it with a config of its own (:func:`config`, written to
``.stack/jaeger/config.yaml`` on every start): spans in memory (gone at ``down``), the
OTLP receivers on gRPC ``INGEST_STACK_JAEGER_OTLP_GRPC_PORT`` (4317) and HTTP
``..._OTLP_HTTP_PORT`` (4318), the query service on ``..._UI_PORT`` (16686: ``/api/...``
and the page) and ``..._QUERY_GRPC_PORT`` (16685), all on 127.0.0.1, and nothing else
(the embedded default config also opens Jaeger, Zipkin, sampling, metrics and health
ports on every interface). A Go-built binary embeds no web assets: ``/`` is Jaeger's
placeholder page unless ``INGEST_STACK_JAEGER_UI_ASSETS`` names a built jaeger-ui.

:func:`server_otel_env` is what the real Temporal server's processes get when tracing
is on, so the server exports its own spans here (``go.temporal.io/server`` 1.31
``common/telemetry/env.go``).
"""

from __future__ import annotations

import fcntl
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from devstack.procs import port_open, wait_for
from devstack.service import Service
from devstack.settings import HOST, StackSettings
from devstack.temporal_build import require_go, run_go

COMMAND = "github.com/jaegertracing/jaeger/cmd/jaeger"
STORE = "memstore"
MAX_TRACES = 100_000  # the in-memory store's bound; the oldest traces go first
# What the real server's resource names start with (`io.temporal.frontend`, ...).
TEMPORAL_SERVICE_PREFIX = "io.temporal"


def build_steps(version: str, out: Path) -> list[list[str]]:
    """The ``go`` commands, run in an empty folder, that build ``jaeger`` ``version`` at ``out``."""
    return [
        ["mod", "init", "ingest-jaeger-build"],
        ["get", "-tool", f"{COMMAND}@v{version}"],
        ["build", "-o", str(out), COMMAND],
    ]


def ensure_jaeger(cache: Path, version: str, log: Path | None = None) -> Path:
    """The cached ``jaeger`` binary of ``version``, built first when missing (once: a
    second caller waits for the first one's build). Raises :class:`StackError`."""
    home = cache.expanduser().resolve() / f"v{version}"
    binary = home / "jaeger"
    if binary.exists():
        return binary
    home.mkdir(parents=True, exist_ok=True)
    with (home / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.exists():  # built by whoever held the lock
            return binary
        go = require_go(
            f"building Jaeger {version}",
            "1.24 or newer, for `go get -tool`",
            "or leave tracing off (no --tracing, INGEST_STACK_TRACING unset)",
        )
        module = home / "module"
        shutil.rmtree(module, ignore_errors=True)
        module.mkdir()
        partial = home / "jaeger.partial"
        started = time.monotonic()
        print(f"jaeger    building {COMMAND}@v{version} with {go} (once; minutes)", flush=True)
        for args in build_steps(version, partial):
            run_go(go, args, log=log, cwd=module)
        partial.rename(binary)  # only a whole binary ever has the cached name
        shutil.rmtree(module, ignore_errors=True)
        took = time.monotonic() - started
        print(f"jaeger    built Jaeger {version} in {took:.0f} s into {home}", flush=True)
    return binary


def query_url(cfg: StackSettings) -> str:
    """The query service: the page at ``/``, the API under ``/api/``."""
    return f"http://{HOST}:{cfg.jaeger_ui_port}"


def otlp_http_endpoint(cfg: StackSettings) -> str:
    """``OTEL_EXPORTER_OTLP_ENDPOINT`` for an OTLP/HTTP exporter (it appends ``/v1/traces``)."""
    return f"http://{HOST}:{cfg.jaeger_otlp_http_port}"


def otlp_grpc_endpoint(cfg: StackSettings) -> str:
    return f"http://{HOST}:{cfg.jaeger_otlp_grpc_port}"


def pipeline_env(cfg: StackSettings) -> dict[str, str]:
    """What a pipeline process needs to send its spans to the stack's Jaeger."""
    return {"INGEST_TRACING": "1", "OTEL_EXPORTER_OTLP_ENDPOINT": otlp_http_endpoint(cfg)}


def server_otel_env(cfg: StackSettings) -> dict[str, str]:
    """The environment of the real Temporal server's processes: empty with tracing off.

    The server (1.31, ``common/telemetry/env.go``) builds span exporters from
    ``OTEL_TRACES_EXPORTER`` (``otlp`` or ``none``; absent: no tracing), only over gRPC
    (another ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` fails its start), and takes
    ``OTEL_SERVICE_NAME`` as the prefix of each service's name (``io.temporal.history``);
    the OTel exporter itself reads the endpoint (``http://`` means no TLS).
    """
    if not cfg.tracing:
        return {}
    endpoint = otlp_grpc_endpoint(cfg)
    return {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,  # wins over the generic one
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
        "OTEL_SERVICE_NAME": TEMPORAL_SERVICE_PREFIX,
    }


def exports_traces(pid: int) -> bool:
    """Whether process ``pid`` was started with ``OTEL_TRACES_EXPORTER=otlp``."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"OTEL_TRACES_EXPORTER=otlp" in environ


def config(cfg: StackSettings) -> dict[str, object]:
    """Jaeger's config: OTLP in, spans in memory, the query service out; all on ``HOST``."""
    query: dict[str, object] = {
        "storage": {"traces": STORE},
        "enable_tracing": False,  # its own query spans would land among the pipeline's
        "http": {"endpoint": f"{HOST}:{cfg.jaeger_ui_port}"},
        "grpc": {"endpoint": f"{HOST}:{cfg.jaeger_query_grpc_port}"},
    }
    if cfg.jaeger_ui_assets is not None:
        query["ui"] = {"assets_path": str(cfg.jaeger_ui_assets.expanduser().resolve())}
    return {
        "service": {
            "extensions": ["jaeger_storage", "jaeger_query"],
            "pipelines": {
                "traces": {
                    "receivers": ["otlp"],
                    "processors": ["batch"],
                    "exporters": ["jaeger_storage_exporter"],
                }
            },
            "telemetry": {
                "resource": {"service.name": "jaeger"},
                "metrics": {"level": "none"},  # else a Prometheus endpoint on :8888
                "logs": {"level": "info"},
            },
        },
        "extensions": {
            "jaeger_storage": {"backends": {STORE: {"memory": {"max_traces": MAX_TRACES}}}},
            "jaeger_query": query,
        },
        "receivers": {
            "otlp": {
                "protocols": {
                    "grpc": {"endpoint": f"{HOST}:{cfg.jaeger_otlp_grpc_port}"},
                    "http": {"endpoint": f"{HOST}:{cfg.jaeger_otlp_http_port}"},
                }
            }
        },
        "processors": {"batch": {}},
        "exporters": {"jaeger_storage_exporter": {"trace_storage": STORE}},
    }


def command(binary: Path, config_file: Path) -> list[str]:
    return [str(binary), "--config", str(config_file)]


# The ports Jaeger listens on, by the setting that moves each.
PORT_SETTINGS = (
    "jaeger_otlp_grpc_port",
    "jaeger_otlp_http_port",
    "jaeger_ui_port",
    "jaeger_query_grpc_port",
)


@dataclass
class Jaeger(Service):
    """Jaeger's all-in-one, with ``ensure``, ``stop`` and ``answering`` as every service."""

    name = "jaeger"
    port_setting = "jaeger_ui_port"

    def handshake(self) -> bool:
        """The query API answers ``GET /api/services`` with its JSON envelope."""
        import httpx

        try:
            res = httpx.get(f"{query_url(self.cfg)}/api/services", timeout=2)
            return res.status_code == 200 and "data" in res.json()
        except (httpx.HTTPError, ValueError):
            return False

    def binary(self) -> Path:
        return ensure_jaeger(
            self.cfg.jaeger_cache,
            self.cfg.jaeger_version,
            log=self.cfg.dir.resolve() / "logs" / "jaeger-build.log",
        )

    def ensure(self) -> str:
        if self.already_running("Jaeger"):
            return "already running"
        for setting in PORT_SETTINGS:
            self.require_free(setting, "Jaeger")
        binary = self.binary()
        self.home.mkdir(parents=True, exist_ok=True)
        conf = self.home / "config.yaml"
        conf.write_text(yaml.safe_dump(config(self.cfg), sort_keys=False))
        self.proc.start(command(binary, conf))
        wait_for(self.answering, "Jaeger", self.proc, 60)
        for setting in PORT_SETTINGS:
            port = getattr(self.cfg, setting)
            wait_for(lambda port=port: port_open(HOST, port), f"Jaeger's :{port}", self.proc, 10)
        return "started"

    def stop(self) -> bool:
        return self.proc.stop(timeout=10)

    def summary(self) -> str:
        return (
            f"{query_url(self.cfg)} (OTLP gRPC {HOST}:{self.cfg.jaeger_otlp_grpc_port}, "
            f"HTTP {HOST}:{self.cfg.jaeger_otlp_http_port}; spans in memory)"
        )
