"""Toxiproxy in the local stack: TCP proxies whose faults (toxics) a test or a person sets.

Toxiproxy ``v<INGEST_STACK_TOXIPROXY_VERSION>`` (2.5.0), Shopify's TCP proxy, built once
from source into ``INGEST_STACK_TOXIPROXY_CACHE/v<version>/toxiproxy-server`` (outside
the checkout, like Jaeger: :mod:`devstack.jaeger`). Its module has no ``replace``
directives, so a plain ``go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0``
builds it (seconds), with the version stamped in as its release build does.

:class:`Toxiproxy` runs it with its HTTP API on ``127.0.0.1:INGEST_STACK_TOXIPROXY_PORT``
(8474) and no proxies; :class:`ToxiproxyClient` creates them (each listens on
127.0.0.1 and forwards to one upstream address) and adds or removes their toxics:
``latency`` (with ``jitter``), ``bandwidth``, ``slow_close``, ``timeout``,
``reset_peer``, ``slicer``, ``limit_data``, each on the ``downstream`` (towards the
client) or ``upstream`` (towards the server) direction. Nothing here starts it with
``ingest stack up`` yet: ``ingest stack build --proxied`` builds it, and the tests run a
private one (``tests/support/toxiproxy.py``).

Kafka clients reach the brokers at the addresses the brokers advertise, so a proxy in
front of the bootstrap address alone would be bypassed: with
``INGEST_STACK_KAFKA_PROXIED_PORT`` the single broker gets a ``PROXIED`` listener
(:func:`kafka_listener_fields`) on ``INGEST_STACK_KAFKA_PROXIED_LISTEN_PORT`` that
advertises the proxy's port, and a proxy from :func:`kafka_listen` to
:func:`kafka_upstream` completes the path; a second, ``PROXIED_B``, on the next ports,
lets one process be cut from Kafka alone. A :class:`devstack.kafka_cluster.KafkaCluster`
made with ``proxied=`` gives each of its nodes such a listener (the soak's 3 brokers).
"""

from __future__ import annotations

import fcntl
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from devstack.procs import StackError, wait_for
from devstack.service import Service
from devstack.settings import HOST, StackSettings
from devstack.temporal_build import require_go, run_go

MODULE = "github.com/Shopify/toxiproxy/v2"
COMMAND = f"{MODULE}/cmd/server"
BINARY = "toxiproxy-server"

ToxicType = Literal[
    "latency", "bandwidth", "slow_close", "timeout", "reset_peer", "slicer", "limit_data"
]
Stream = Literal["downstream", "upstream"]


def build_steps(version: str) -> list[list[str]]:
    """The ``go`` commands (``GOBIN`` set to an empty folder) that build ``version``'s
    server there as ``server``; ``-X ...Version`` is what its release build stamps in."""
    ldflags = f"-s -w -X {MODULE}.Version=v{version}"
    return [["install", f"-ldflags={ldflags}", f"{COMMAND}@v{version}"]]


def ensure_toxiproxy(cache: Path, version: str, log: Path | None = None) -> Path:
    """The cached ``toxiproxy-server`` of ``version``, built first when missing (once: a
    second caller waits for the first one's build). Raises :class:`StackError`."""
    home = cache.expanduser().resolve() / f"v{version}"
    binary = home / BINARY
    if binary.exists():
        return binary
    home.mkdir(parents=True, exist_ok=True)
    with (home / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.exists():  # built by whoever held the lock
            return binary
        go = require_go(
            f"building Toxiproxy {version}",
            "1.17 or newer",
            "or leave the proxies out (no --proxied)",
        )
        partial = home / "partial"  # GOBIN: go install names the binary `server`
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        started = time.monotonic()
        print(f"toxiproxy building {COMMAND}@v{version} with {go} (once)", flush=True)
        for args in build_steps(version):
            run_go(go, args, log=log, env={"GOBIN": str(partial)})
        (partial / "server").rename(binary)  # only a whole binary ever has the cached name
        shutil.rmtree(partial, ignore_errors=True)
        took = time.monotonic() - started
        print(f"toxiproxy built Toxiproxy {version} in {took:.0f} s into {home}", flush=True)
    return binary


# The broker's listeners that proxies stand in front of: PROXIED for the processes, and
# PROXIED_B on the next ports for one process to be cut alone (a proxy's toxics reach
# every client of it, and a client follows the address its listener advertises).
KAFKA_LISTENERS = ("PROXIED", "PROXIED_B")
KAFKA_LISTENER = KAFKA_LISTENERS[0]


def kafka_listener_fields(cfg: StackSettings) -> tuple[str, str, str]:
    """The PROXIED listeners of the single broker (``cfg.kafka_proxied_port`` > 0), for
    ``listeners``, ``advertised.listeners`` and ``listener.security.protocol.map``, each
    with a leading comma: listener ``i`` listens on ``kafka_proxied_listen_port + i`` and
    advertises the proxy's ``kafka_proxied_port + i``, so a client that bootstraps
    through a proxy keeps using it after the first metadata answer. Plaintext;
    inter-broker stays PLAINTEXT."""
    listeners = advertised = protocols = ""
    for i, name in enumerate(KAFKA_LISTENERS):
        listeners += f",{name}://{kafka_upstream(cfg, i)}"
        advertised += f",{name}://{kafka_listen(cfg, i)}"
        protocols += f",{name}:PLAINTEXT"
    return listeners, advertised, protocols


def kafka_upstream(cfg: StackSettings, i: int = 0) -> str:
    """What Kafka proxy ``i`` forwards to: the broker's PROXIED listener ``i``."""
    return f"{HOST}:{cfg.kafka_proxied_listen_port + i}"


def kafka_listen(cfg: StackSettings, i: int = 0) -> str:
    """Where Kafka proxy ``i`` listens: the address PROXIED listener ``i`` advertises."""
    return f"{HOST}:{cfg.kafka_proxied_port + i}"


def command(binary: Path, port: int) -> list[str]:
    return [str(binary), "-host", HOST, "-port", str(port)]


@dataclass
class Toxiproxy(Service):
    """The Toxiproxy server, with ``ensure``, ``stop`` and ``answering`` as every service."""

    name = "toxiproxy"
    port_setting = "toxiproxy_port"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    def client(self) -> ToxiproxyClient:
        return ToxiproxyClient(self.url)

    def handshake(self) -> bool:
        """``GET /version`` answers with a version (``v2.5.0``) and ``GET /proxies`` with
        the (JSON) table of proxies."""
        try:
            client = self.client()
            return bool(client.version()) and isinstance(client.proxies(), dict)
        except ToxiproxyError:
            return False

    def binary(self) -> Path:
        return ensure_toxiproxy(
            self.cfg.toxiproxy_cache,
            self.cfg.toxiproxy_version,
            log=self.cfg.dir.resolve() / "logs" / "toxiproxy-build.log",
        )

    def ensure(self) -> str:
        if self.already_running("Toxiproxy"):
            return "already running"
        self.require_free("toxiproxy_port", "Toxiproxy")
        port = self.cfg.toxiproxy_port
        binary = self.binary()
        self.home.mkdir(parents=True, exist_ok=True)
        self.proc.start(command(binary, port))
        wait_for(self.answering, "Toxiproxy", self.proc, 30)
        return "started"

    def stop(self) -> bool:
        return self.proc.stop(timeout=10)

    def summary(self) -> str:
        return f"{self.url} (Toxiproxy's API; proxies on 127.0.0.1)"


class ToxiproxyError(StackError):
    """Toxiproxy's API refused a request (its status and message), or did not answer."""


@dataclass(frozen=True)
class Proxy:
    name: str
    listen: str  # host:port it accepts connections on (the port it chose for ":0")
    upstream: str  # host:port it forwards them to
    enabled: bool

    @property
    def port(self) -> int:
        return int(self.listen.rpartition(":")[2])


@dataclass(frozen=True)
class Toxic:
    name: str
    type: str
    stream: str
    toxicity: float
    attributes: dict[str, Any]


@dataclass(frozen=True)
class ToxiproxyClient:
    """Toxiproxy's HTTP API (``url``: ``http://127.0.0.1:8474``). Every refusal raises
    :class:`ToxiproxyError` with Toxiproxy's own message."""

    url: str
    timeout: float = 10

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        import httpx

        try:
            res = httpx.request(method, f"{self.url}{path}", json=body, timeout=self.timeout)
        except httpx.HTTPError as exc:
            raise ToxiproxyError(f"{method} {self.url}{path}: {exc!r}") from exc
        if res.status_code >= 400:
            try:
                why = res.json().get("error", res.text)
            except ValueError:
                why = res.text
            raise ToxiproxyError(f"{method} {path}: {res.status_code} {str(why).strip()}")
        if res.status_code == 204 or not res.content:
            return None
        if res.headers.get("content-type", "").startswith("application/json"):
            return res.json()
        return res.text

    def version(self) -> str:
        return str(self._call("GET", "/version")).strip()

    def proxies(self) -> dict[str, Proxy]:
        found = self._call("GET", "/proxies") or {}
        return {name: _proxy(p) for name, p in found.items()}

    def create_proxy(self, name: str, upstream: str, listen: str = f"{HOST}:0") -> Proxy:
        """A proxy from ``listen`` (default: a free port on 127.0.0.1) to ``upstream``."""
        body = {"name": name, "listen": listen, "upstream": upstream, "enabled": True}
        return _proxy(self._call("POST", "/proxies", body))

    def proxy(self, name: str) -> Proxy:
        return _proxy(self._call("GET", f"/proxies/{name}"))

    def set_enabled(self, name: str, enabled: bool) -> Proxy:
        """Disabled: it closes its connections and refuses new ones (the service "down")."""
        return _proxy(self._call("POST", f"/proxies/{name}", {"enabled": enabled}))

    def delete_proxy(self, name: str) -> None:
        self._call("DELETE", f"/proxies/{name}")

    def add_toxic(
        self,
        proxy: str,
        type: ToxicType,
        attributes: dict[str, Any] | None = None,
        *,
        stream: Stream = "downstream",
        name: str | None = None,
        toxicity: float = 1.0,
    ) -> Toxic:
        """A toxic on ``proxy``'s ``stream``; ``attributes`` as Toxiproxy names them
        (``latency``/``jitter`` ms, ``rate`` KB/s, ``delay`` ms, ``timeout`` ms (0: never
        closes), ``average_size``/``size_variation``/``delay`` (slicer), ``bytes``).
        ``toxicity``: the share of connections it applies to. Its name defaults to
        ``<type>_<stream>``, as Toxiproxy's own default."""
        body = {
            "name": name or f"{type}_{stream}",
            "type": type,
            "stream": stream,
            "toxicity": toxicity,
            "attributes": attributes or {},
        }
        return _toxic(self._call("POST", f"/proxies/{proxy}/toxics", body))

    def toxics(self, proxy: str) -> list[Toxic]:
        return [_toxic(t) for t in self._call("GET", f"/proxies/{proxy}/toxics") or []]

    def remove_toxic(self, proxy: str, toxic: str) -> None:
        self._call("DELETE", f"/proxies/{proxy}/toxics/{toxic}")

    def reset(self) -> None:
        """Every proxy enabled again and without toxics (the proxies stay)."""
        self._call("POST", "/reset")


def _proxy(p: dict[str, Any]) -> Proxy:
    return Proxy(name=p["name"], listen=p["listen"], upstream=p["upstream"], enabled=p["enabled"])


def _toxic(t: dict[str, Any]) -> Toxic:
    return Toxic(
        name=t["name"],
        type=t["type"],
        stream=t["stream"],
        toxicity=float(t["toxicity"]),
        attributes=dict(t.get("attributes") or {}),
    )
