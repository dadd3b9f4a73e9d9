"""Everything the soak runs on, private to it, and the faults it injects.

* PostgreSQL: a private embedded server (``devstack.postgres``) holding the pipeline's
  database (``soak``, migrated) and the Temporal server's two databases, so one
  restart hits both, as one shared database server would in production.
* Temporal: a private real server in its split shape (``tests.support.temporal_server``:
  frontend, matching, worker, two history processes, 4 shards) on that PostgreSQL.
* Kafka: the private 3-broker KRaft cluster of the failover scenarios
  (``tests/faults/cluster.py``), topics with replication 3 and ``min.insync.replicas=2``.
* Toxiproxy: a private one (``tests/support/toxiproxy.py``) with a proxy in front of the
  Temporal frontend, one in front of PostgreSQL and one in front of each broker; the
  pipeline's processes reach every server only through them. Each broker advertises its
  proxy's address on its PROXIED listener (``KafkaCluster(proxied=...)``), so a client
  that bootstraps through the proxies keeps using them after the first metadata answer
  (a proxy at the bootstrap address alone would be bypassed: issue 40). The soak's own
  producer, sampler and checks reach every server directly.
* The pipeline: real ``ingest ingress|router|worker|relay`` processes
  (``tests.faults.harness.Pipeline``), each with its metrics port.

:data:`FAULTS` maps each fault kind to what it does; every kill is followed by a restart
of the same kind, as a supervisor would, and every fault is logged with its start and end.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devstack.kafka_cluster import KafkaCluster
from devstack.postgres import Postgres
from devstack.temporal_server import TemporalServer
from devstack.toxiproxy import Proxy, ToxiproxyClient

from tests.faults import harness as h
from tests.soak.analysis import Fault
from tests.soak.knobs import Knobs
from tests.support import toxiproxy as support

PIPELINE = ("ingress", "router", "worker", "relay")
LATENCY = {"latency": 500, "jitter": 200}  # ms, on every answer (downstream)
BANDWIDTH_KB = 64  # KB/s each way to every broker, as in the network scenario


MEMPROBE = Path(__file__).parent / "memprobe"  # its sitecustomize (knobs: SOAK_MEMPROBE)


def memprobe_env(knobs: Knobs, out_dir: Path) -> dict[str, dict[str, str]]:
    """Per kind that ``SOAK_MEMPROBE`` names, the environment that loads the memory probe
    and where it writes (``memprobe-<kind>.jsonl``; a restarted process appends)."""
    path = os.pathsep.join(p for p in (str(MEMPROBE), os.environ.get("PYTHONPATH", "")) if p)
    return {
        kind: {
            "PYTHONPATH": path,
            "MEMPROBE_OUT": str(out_dir / f"memprobe-{kind}.jsonl"),
            "MEMPROBE_EVERY": str(knobs.memprobe_every),
            "MEMPROBE_FRAMES": str(knobs.memprobe_frames),
        }
        for kind in knobs.memprobe
    }


@dataclass
class Rig:
    pipe: h.Pipeline
    pg: Postgres
    server: TemporalServer
    cluster: KafkaCluster
    toxi: ToxiproxyClient
    temporal_proxy: Proxy
    pg_proxy: Proxy
    kafka_proxies: list[Proxy]
    toxic_seconds: float
    current: dict[str, h.Child] = field(default_factory=dict)
    killed: list[h.Child] = field(default_factory=list)  # children the soak itself killed
    faults: list[Fault] = field(default_factory=list)
    _broker: int = 0  # the next broker to restart (they take turns)

    async def start_pipeline(
        self, per_kind: dict[str, dict[str, str]] | None = None, **extra: str
    ) -> None:
        """Every kind of :data:`PIPELINE` with ``extra`` in its environment, plus its own
        ``per_kind`` entries (a restart keeps both: ``Pipeline.restart``)."""
        per_kind = dict(per_kind or {})
        per_kind["relay"] = {
            **per_kind.get("relay", {}),
            "INGEST_RELAY_INSTANCE": f"soak-{self.pipe.tag}",
            "INGEST_RELAY_PROGRESS_TOPIC": f"progress-{self.pipe.tag}",
        }
        for kind in PIPELINE:
            env = {**extra, **per_kind.get(kind, {})}
            self.current[kind] = await self.pipe.spawn(kind, metrics=True, **env)

    def alive(self) -> None:
        """Every current pipeline process runs (a dead one that the soak did not kill fails)."""
        for child in self.current.values():
            child.assert_alive()

    def unexpected_exits(self) -> list[str]:
        """Processes that exited although the soak never killed them (pipeline and servers)."""
        dead = [
            f"{c.kind} ({c.logfile.name}, exit {c.proc.returncode if c.proc else None})"
            for c in self.pipe.children
            if not c.alive and c not in self.killed
        ]
        dead += [sp.name for sp, proc in self.server.procs() if proc.pid() is None]
        dead += [f"broker {n.node_id}" for n in self.cluster.nodes if n.proc.pid() is None]
        return dead

    async def inject(self, kind: str) -> Fault:
        """Inject ``kind``; the fault is logged to ``faults.log`` in the test's tmp dir as
        it begins and ends (a run that fails midway still says what it had done)."""
        fault = Fault(kind, time.time(), 0.0)
        self.faults.append(fault)
        self._log(f"begin {kind}")
        fault.detail = await FAULTS[kind](self)
        fault.end = time.time()
        self._log(f"end {kind} {fault.detail}")
        return fault

    def _log(self, line: str) -> None:
        stamped = f"{time.strftime('%H:%M:%S')} {line}"
        print(f"soak: {stamped}", flush=True)  # progress, with pytest -s
        with (self.pipe.tmp / "faults.log").open("a") as out:
            out.write(stamped + "\n")

    # --- the fault kinds ------------------------------------------------------------

    async def kill(self, kind: str) -> dict[str, Any]:
        child = self.current[kind]
        self.killed.append(child)
        await child.kill()
        await asyncio.sleep(1)  # a supervisor's restart delay
        self.current[kind] = await self.pipe.restart(child)
        return {"pid": child.proc.pid if child.proc else None}

    async def kill_server(self, name: str, down: float) -> dict[str, Any]:
        proc = next(p for sp, p in self.server.procs() if sp.name == name)
        pid = proc.pid()
        assert pid is not None, f"{name} is not running"
        os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(down)
        await asyncio.to_thread(self.server.ensure)  # starts what is not running
        return {"pid": pid}

    async def pg_restart(self) -> dict[str, Any]:
        await asyncio.to_thread(self.pg.stop)
        await asyncio.to_thread(self.pg.ensure)
        return {}

    async def broker_restart(self) -> dict[str, Any]:
        node = self.cluster.nodes[self._broker % len(self.cluster.nodes)].node_id
        self._broker += 1
        stop_s = await asyncio.to_thread(self.cluster.terminate, node)
        await asyncio.to_thread(self.cluster.start, node)
        return {"node": node, "stop_s": round(stop_s, 1)}

    async def bandwidth(self, proxies: list[Proxy]) -> dict[str, Any]:
        """BANDWIDTH_KB each way on every proxy for the toxic's length."""
        with contextlib.ExitStack() as held:
            for proxy in proxies:
                for stream in ("upstream", "downstream"):
                    held.enter_context(
                        support.toxic(
                            self.toxi, proxy, "bandwidth", {"rate": BANDWIDTH_KB}, stream=stream
                        )
                    )
            await asyncio.sleep(self.toxic_seconds)
        return {"seconds": round(self.toxic_seconds), "kb_per_s": BANDWIDTH_KB}

    async def toxic(
        self, proxies: list[Proxy], type: Any, attrs: dict[str, Any], stream: Any
    ) -> dict[str, Any]:
        with contextlib.ExitStack() as held:
            for proxy in proxies:
                held.enter_context(support.toxic(self.toxi, proxy, type, attrs, stream=stream))
            await asyncio.sleep(self.toxic_seconds)
        return {"seconds": round(self.toxic_seconds)}

    async def resets(self, proxies: list[Proxy]) -> dict[str, Any]:
        """Answers held back 1 s and every connection reset every 2.5 s, as in the network
        scenario. On Temporal: a start the server made may never be answered; its retry
        must be a duplicate, never a second run. On Kafka: a produce the broker wrote may
        never be acknowledged, and the relay's link is cut inside its transactions."""
        resets = 0
        begin = time.monotonic()
        with contextlib.ExitStack() as slow:
            for proxy in proxies:
                slow.enter_context(support.toxic(self.toxi, proxy, "latency", {"latency": 1000}))
            while time.monotonic() - begin < self.toxic_seconds:
                await asyncio.sleep(2.5)
                with contextlib.ExitStack() as cut:
                    for proxy in proxies:
                        cut.enter_context(
                            support.toxic(self.toxi, proxy, "reset_peer", {"timeout": 0})
                        )
                    resets += 1
                    await asyncio.sleep(0.3)
        return {"resets": resets}


FAULTS: dict[str, Callable[[Rig], Awaitable[dict[str, Any]]]] = {
    "kill_ingress": lambda r: r.kill("ingress"),
    "kill_router": lambda r: r.kill("router"),
    "kill_worker": lambda r: r.kill("worker"),
    "kill_relay": lambda r: r.kill("relay"),
    "kill_history": lambda r: r.kill_server("temporal-history-1", 2),
    "kill_frontend": lambda r: r.kill_server("temporal-frontend", 5),
    "pg_restart": lambda r: r.pg_restart(),
    "broker_restart": lambda r: r.broker_restart(),
    "net_latency": lambda r: r.toxic(
        [r.temporal_proxy, r.pg_proxy, *r.kafka_proxies], "latency", LATENCY, "downstream"
    ),
    "net_reset": lambda r: r.resets([r.temporal_proxy, *r.kafka_proxies]),
    "net_half_open_pg": lambda r: r.toxic([r.pg_proxy], "timeout", {"timeout": 0}, "upstream"),
    "net_bandwidth_kafka": lambda r: r.bandwidth(r.kafka_proxies),
}

# The order faults take turns in: a short run (one a minute) sees a process kill, a
# server kill, a network fault and a database restart first.
ROTATION = (
    "kill_router",
    "kill_history",
    "net_reset",
    "pg_restart",
    "kill_worker",
    "broker_restart",
    "net_latency",
    "kill_frontend",
    "net_bandwidth_kafka",
    "kill_ingress",
    "net_half_open_pg",
    "kill_relay",
)
assert set(ROTATION) == set(FAULTS)
