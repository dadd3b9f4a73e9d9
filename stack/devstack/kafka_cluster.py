"""A local multi-node KRaft Kafka cluster: N combined broker+controller JVMs on one machine.

Used by ``ingest stack up --kafka-nodes 3`` (a person trying failover by hand) and
by the fault suite's broker-failover scenarios (a private cluster on free ports).
It runs the same Maven jars as the single-node stack (``Kafka.libs()`` fetches
them once), one JVM per node, each started and stopped by its pid file.

The settings are those of a small production cluster, so failover behaves the
way it would there:

* a static controller quorum of all nodes (``controller.quorum.voters``): any
  majority elects the active controller;
* ``default.replication.factor=3`` (at most the node count),
  ``min.insync.replicas=2``, ``unclean.leader.election.enable=false``: an
  ``acks=all`` write is on two nodes before it is acknowledged, and a replica
  that missed acknowledged writes never becomes leader;
* the internal topics (consumer offsets, transactions) replicated the same way,
  so a consumer group's coordinator moves instead of disappearing.

Small heaps, C1-only JIT and few threads keep three JVMs affordable on 2 cores.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from devstack.kafka import Kafka, _java, _kafka_cluster_id, _kafka_handshake
from devstack.kafka_inspect import metadata
from devstack.procs import Proc, StackError, pid_alive, port_open
from devstack.settings import HOST, StackSettings
from devstack.templates import template

# The JVM flags of a cluster node: a small fixed heap, the serial collector (no
# parallel GC threads), C1 only (less JIT CPU; a short-lived test broker never
# pays back C2's compile time).
JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:+ExitOnOutOfMemoryError"]


def stack_kafka(cfg: StackSettings, nodes: int | None = None) -> Kafka | KafkaCluster:
    """The stack's Kafka: one node (``Kafka``) or a cluster of ``nodes``.

    Without ``nodes``: the cluster already started under ``.stack/kafka-cluster``
    if there is one (so ``status`` and ``down`` find it), else
    ``INGEST_STACK_KAFKA_NODES`` (default 1).
    """
    if nodes is None:
        home = cfg.dir / "kafka-cluster"
        started = sorted(home.glob("run/kafka-*.pid"))
        nodes = len(list(home.glob("node-*"))) if started else cfg.kafka_nodes
    return KafkaCluster.for_stack(cfg, nodes) if nodes > 1 else Kafka(cfg)


@dataclass(frozen=True)
class Node:
    node_id: int
    port: int
    controller_port: int
    home: Path  # data, server.properties
    proc: Proc  # pid file and log
    # PROXIED (opt-in): the listener's own port, and the port it advertises, where a
    # Toxiproxy proxy forwards to it (devstack.toxiproxy: a client that bootstraps through
    # the proxies keeps using them after the first metadata answer).
    proxied: tuple[int, int] | None = None

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def proxied_upstream(self) -> str:
        """What this node's proxy forwards to: its PROXIED listener."""
        assert self.proxied is not None, f"node {self.node_id} has no PROXIED listener"
        return f"{HOST}:{self.proxied[0]}"

    @property
    def proxied_address(self) -> str:
        """Where this node's proxy listens: the address its PROXIED listener advertises."""
        assert self.proxied is not None, f"node {self.node_id} has no PROXIED listener"
        return f"{HOST}:{self.proxied[1]}"

    def listener_fields(self) -> dict[str, str]:
        """The PROXIED listener's parts of ``listeners``, ``advertised.listeners`` and the
        protocol map, each with a leading comma ("" without one). Plaintext."""
        if self.proxied is None:
            return {"more_listeners": "", "more_advertised": "", "more_protocols": ""}
        return {
            "more_listeners": f",PROXIED://{self.proxied_upstream}",
            "more_advertised": f",PROXIED://{self.proxied_address}",
            "more_protocols": ",PROXIED:PLAINTEXT",
        }


class KafkaCluster:
    """``nodes`` combined broker+controller processes sharing one cluster id."""

    def __init__(
        self,
        home: Path,
        libs: Path | Callable[[], Path],
        ports: list[tuple[int, int]],
        *,
        heap: str = "256m",
        replication_factor: int = 3,
        proxied: list[tuple[int, int]] | None = None,
    ) -> None:
        """``ports``: each node's (broker, controller) port; ``proxied``: each node's
        PROXIED (listen, advertised) ports, or None for no such listener."""
        if proxied is not None and len(proxied) != len(ports):
            raise StackError(f"{len(proxied)} PROXIED port pairs for {len(ports)} Kafka nodes")
        used = [p for pair in [*ports, *(proxied or [])] for p in pair]
        if len(set(used)) != len(used):
            raise StackError(f"Kafka cluster ports overlap: {ports}")
        self.home = home.resolve()
        self._libs = libs
        self.heap = heap
        self.replication_factor = min(replication_factor, len(ports))
        # One less than the replication factor, at most 2 (as pipeline.clients.topic_configs).
        self.min_insync_replicas = max(1, min(2, self.replication_factor - 1))
        self.nodes = [
            Node(
                node_id=i,
                port=port,
                controller_port=cport,
                home=self.home / f"node-{i}",
                proc=Proc(self.home, f"kafka-{i}"),
                proxied=proxied[i - 1] if proxied else None,
            )
            for i, (port, cport) in enumerate(ports, start=1)
        ]

    @classmethod
    def for_stack(cls, cfg: StackSettings, nodes: int) -> KafkaCluster:
        """The cluster ``ingest stack up --kafka-nodes N`` runs under ``.stack/kafka-cluster``.

        Node 1 listens on ``INGEST_STACK_KAFKA_PORT`` (9092) so the default bootstrap
        address still works; node i on that port + 2(i-1) (9094, 9096), controllers
        on ``INGEST_STACK_KAFKA_CONTROLLER_PORT`` + 2(i-1) (9093, 9095, 9097).
        """
        ports = [(cfg.kafka_port + 2 * i, cfg.kafka_controller_port + 2 * i) for i in range(nodes)]
        return cls(cfg.dir / "kafka-cluster", Kafka(cfg).libs, ports)

    @property
    def libs(self) -> Path:
        """The broker jars (fetched with Maven on first use when given ``Kafka.libs``)."""
        if callable(self._libs):
            self._libs = self._libs()
        return self._libs

    # --- addresses and state --------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """Every node's address, comma-separated: what KAFKA_BOOTSTRAP_SERVERS should say."""
        return ",".join(n.address for n in self.nodes)

    @property
    def address(self) -> str:
        return self.bootstrap

    @property
    def proxied_bootstrap(self) -> str:
        """Every node's proxy address: the bootstrap of a client that must go through them."""
        return ",".join(n.proxied_address for n in self.nodes)

    def node(self, node_id: int) -> Node:
        return self.nodes[node_id - 1]

    def running(self) -> list[int]:
        return [n.node_id for n in self.nodes if n.proc.pid() is not None]

    def answering(self) -> bool:
        return all(port_open(HOST, n.port) and _kafka_handshake(n.address) for n in self.nodes)

    # --- start and stop -----------------------------------------------------------

    def ensure(self) -> str:
        """Start every node not running yet, then wait until all of them are brokers."""
        if len(self.running()) == len(self.nodes) and self.answering():
            return "already running"
        for n in self.nodes:
            if n.proc.pid() is None and port_open(HOST, n.port):
                raise StackError(
                    f"port {n.port} is taken by a process this cluster did not start "
                    "(a single-node stack? run `ingest stack down` first)"
                )
        java = _java()
        self._configure(java)
        for n in self.nodes:
            if n.proc.pid() is None:
                self._spawn(java, n)
        deadline = time.monotonic() + 120
        for n in self.nodes:
            self._wait_node(n, deadline)
        self.wait_brokers(len(self.nodes), 60)
        return "started"

    def stop(self) -> bool:
        """SIGTERM every node (controlled shutdown), all at once; False if none was running."""
        stopped = [n for n in self.nodes if n.proc.pid() is not None]
        for n in stopped:
            self._signal(n, signal.SIGTERM)
        for n in stopped:
            n.proc.stop(timeout=30)  # SIGKILLs what is still alive after 30 s
        for n in self.nodes:
            n.proc.pidfile.unlink(missing_ok=True)
        return bool(stopped)

    def start(self, node_id: int, timeout: float = 90) -> None:
        """Start one node again (after :meth:`kill` or :meth:`terminate`); waits for it."""
        n = self.node(node_id)
        if n.proc.pid() is not None:
            raise StackError(f"Kafka node {node_id} is already running")
        self._spawn(_java(), n)
        self._wait_node(n, time.monotonic() + timeout)

    def _wait_node(self, n: Node, deadline: float) -> None:
        """Until node ``n`` answers: the handshake bootstraps from ``n`` alone."""
        self._poll(lambda: port_open(HOST, n.port) and _kafka_handshake(n.address), deadline)

    def _poll(self, check: Callable[[], bool], deadline: float) -> None:
        """Until ``check()``; fails with the log tail of a node that died, or on time out."""
        while not check():
            dead = [n for n in self.nodes if n.proc.pidfile.exists() and n.proc.pid() is None]
            if dead:
                raise StackError(
                    f"Kafka node {dead[0].node_id} exited; last log lines:\n{dead[0].proc.tail()}"
                )
            if time.monotonic() > deadline:
                raise StackError(f"the Kafka cluster did not get ready; see {self.home / 'logs'}")
            time.sleep(0.3)

    def kill(self, node_id: int) -> None:
        """SIGKILL one node: no controlled shutdown, nothing flushed."""
        n = self.node(node_id)
        pid = n.proc.pid()
        if pid is None:
            raise StackError(f"Kafka node {node_id} is not running")
        self._signal(n, signal.SIGKILL)
        self._wait_exit(pid, 30)
        n.proc.pidfile.unlink(missing_ok=True)

    def terminate(self, node_id: int, timeout: float = 120) -> float:
        """SIGTERM one node and wait for it to exit (a controlled shutdown); returns seconds.

        Raises if it is still alive after ``timeout``: an upgrade that has to
        SIGKILL a broker is not a rolling restart.
        """
        n = self.node(node_id)
        pid = n.proc.pid()
        if pid is None:
            raise StackError(f"Kafka node {node_id} is not running")
        t0 = time.monotonic()
        self._signal(n, signal.SIGTERM)
        if not self._wait_exit(pid, timeout):
            raise StackError(f"Kafka node {node_id} ignored SIGTERM for {timeout:.0f}s")
        n.proc.pidfile.unlink(missing_ok=True)
        return time.monotonic() - t0

    def _signal(self, n: Node, sig: signal.Signals) -> None:
        pid = n.proc.pid()
        if pid is not None:
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                pass

    @staticmethod
    def _wait_exit(pid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while pid_alive(pid):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def _configure(self, java: str) -> None:
        """Write each node's server.properties; format its storage once (one cluster id)."""
        id_file = self.home / "cluster.id"
        if not id_file.exists():
            self.home.mkdir(parents=True, exist_ok=True)
            id_file.write_text(_kafka_cluster_id())
        cluster_id = id_file.read_text().strip()
        voters = ",".join(f"{n.node_id}@{HOST}:{n.controller_port}" for n in self.nodes)
        (self.home / "log4j2.properties").write_text(template("log4j2.properties"))
        for n in self.nodes:
            n.home.mkdir(parents=True, exist_ok=True)
            props = n.home / "server.properties"
            props.write_text(
                template("kafka-cluster.properties").format(
                    node_id=n.node_id,
                    voters=voters,
                    host=HOST,
                    port=n.port,
                    cport=n.controller_port,
                    data=n.home / "data",
                    rf=self.replication_factor,
                    min_isr=self.min_insync_replicas,
                    **n.listener_fields(),
                )
            )
            if (n.home / "data" / "meta.properties").exists():
                continue
            res = subprocess.run(
                [java, "-cp", f"{self.libs}/*", "kafka.tools.StorageTool", "format"]
                + ["-t", cluster_id, "-c", str(props)],
                capture_output=True,
                text=True,
            )
            if res.returncode != 0:
                raise StackError(
                    f"formatting node {n.node_id}'s storage failed:\n{res.stdout}{res.stderr}"
                )

    def _spawn(self, java: str, n: Node) -> None:
        n.proc.start(
            [java, f"-Xmx{self.heap}", f"-Xms{self.heap}", *JVM_FLAGS]
            + [f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}"]
            + [f"-Dkafka.logs.dir={n.home / 'logs'}", "-cp", f"{self.libs}/*"]
            + ["kafka.Kafka", str(n.home / "server.properties")]
        )

    # --- what the cluster says about itself ------------------------------------------

    def wait_brokers(self, count: int, timeout: float) -> None:
        """Until the metadata lists ``count`` brokers (or a node dies, or time runs out)."""

        def enough() -> bool:
            try:
                return len(asyncio.run(metadata(self.bootstrap))["brokers"]) >= count
            except Exception:
                return False

        self._poll(enough, time.monotonic() + timeout)
