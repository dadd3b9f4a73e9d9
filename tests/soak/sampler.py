"""Live samples while the soak runs, every :data:`EVERY` seconds.

Per current pipeline process (the one of each kind now running: a killed one is
replaced by its restart, with a new pid): RSS and open file descriptors (psutil).
PostgreSQL: the pipeline processes' connections to their database (``pg_stat_activity``;
the test's own, named :data:`TEST_APP`, are left out).
Kafka: the lag in messages of the ingress group on the raw topic and of the router
group on the events topic (end offsets minus committed offsets, asked of the cluster,
not of the processes), and the lag in seconds that ingress and the router report
(``pipeline_consumer_lag_seconds``, the oldest partition). A value that cannot be read
at that moment (a server down during a fault) is left out of the sample, never taken
as 0. Samples are appended to ``samples.jsonl`` as they are taken.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson
import psutil
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from tests.soak.analysis import ProcSample, Sample
from tests.soak.rig import Rig
from tests.support import kafka
from tests.support.metrics import _SAMPLE

EVERY = 5.0
TEST_APP = "soak-test"  # the application_name of the test's own connections (not counted)


async def lag_seconds(port: int) -> float:
    """The largest ``pipeline_consumer_lag_seconds`` sample a process exposes."""
    async with httpx.AsyncClient() as http:
        resp = await http.get(f"http://127.0.0.1:{port}/metrics", timeout=3)
    resp.raise_for_status()
    values = [
        float(m.group(3))
        for line in resp.text.splitlines()
        if (m := _SAMPLE.match(line)) and m.group(1) == "pipeline_consumer_lag_seconds"
    ]
    return max(values, default=0.0)


class Sampler:
    def __init__(self, rig: Rig, admin_url: str, database: str, path: Path) -> None:
        self.rig = rig
        self.admin_url = admin_url
        self.database = database
        self.path = path
        self.samples: list[Sample] = []
        self.errors = 0

    def procs(self) -> dict[str, ProcSample]:
        out = {}
        for kind, child in self.rig.current.items():
            if child.proc is None or child.proc.returncode is not None:
                continue
            try:
                p = psutil.Process(child.proc.pid)
                out[kind] = ProcSample(p.pid, p.memory_info().rss, p.num_fds())
            except psutil.Error:
                continue
        return out

    async def pg_connections(self) -> int:
        conn = await asyncpg.connect(self.admin_url, timeout=3)
        try:
            n = await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = $1"
                " AND application_name <> $2",
                self.database,
                TEST_APP,
            )
            return int(n)
        finally:
            await conn.close()

    async def run(self) -> None:
        pipe = self.rig.pipe
        bootstrap = self.rig.cluster.bootstrap  # direct: a Kafka toxic must not slow the sampler
        groups = {
            "ingress": (pipe.ingress_group, pipe.topics.raw),
            "router": (pipe.router_group, pipe.topics.events),
        }
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
        ends = AIOKafkaConsumer(bootstrap_servers=bootstrap, request_timeout_ms=5000)
        await admin.start()
        await ends.start()
        try:
            with self.path.open("w") as out:
                while True:
                    begin = time.monotonic()
                    sample = Sample(time.time(), self.procs())
                    try:
                        sample.pg_connections = await asyncio.wait_for(self.pg_connections(), 4)
                    except Exception:
                        self.errors += 1
                    for name, (group, topic) in groups.items():
                        try:
                            sample.lag[name] = await asyncio.wait_for(
                                self._lag(admin, ends, group, topic), 8
                            )
                        except Exception:
                            self.errors += 1
                        child = self.rig.current.get(name)
                        try:
                            if child is not None and child.alive:
                                sample.lag_seconds[name] = await lag_seconds(child.metrics_port)
                        except Exception:
                            self.errors += 1
                    self.samples.append(sample)
                    out.write(orjson.dumps(_plain(sample)).decode() + "\n")
                    out.flush()
                    await asyncio.sleep(max(0.0, EVERY - (time.monotonic() - begin)))
        finally:
            await ends.stop()
            await admin.close()

    @staticmethod
    async def _lag(
        admin: AIOKafkaAdminClient, ends: AIOKafkaConsumer, group: str, topic: str
    ) -> int:
        parts = ends.partitions_for_topic(topic) or await kafka.partitions(ends, topic)
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        end = await ends.end_offsets(tps)
        done = await admin.list_consumer_group_offsets(group, partitions=tps)
        # nothing committed yet (no entry, or offset -1): the whole partition is lag
        return sum(end[tp] - max(0, done[tp].offset if tp in done else 0) for tp in tps)


def _plain(sample: Sample) -> dict[str, Any]:
    return asdict(sample)
