"""``ingest ops`` and ``ingest worker`` as real subprocesses, with their output kept."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from pipeline.settings import Settings

ROOT = Path(__file__).resolve().parents[3]


def env_for(cfg: Settings, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": cfg.database.url.get_secret_value(),
        "TEMPORAL_ADDRESS": cfg.temporal.address,
        "TEMPORAL_TASK_QUEUE": cfg.temporal.task_queue,
        "KAFKA_BOOTSTRAP_SERVERS": cfg.kafka.bootstrap_servers,
        "KAFKA_EVENTS_TOPIC": cfg.kafka.events_topic,
        "KAFKA_DLQ_TOPIC": cfg.kafka.dlq_topic,
        "INGEST_METRICS_PORT": "0",
        **extra,
    }


@dataclass
class Proc:
    proc: asyncio.subprocess.Process
    output: bytearray = field(default_factory=bytearray)
    pump: asyncio.Task[None] | None = None

    @classmethod
    async def start(cls, env: dict[str, str], *args: str) -> Proc:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "app.cli", *args, cwd=ROOT, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        me = cls(proc)
        me.pump = asyncio.create_task(me._read())
        return me

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while chunk := await self.proc.stdout.read(4096):
            self.output += chunk

    async def stop(self, sig: int | None = signal.SIGTERM) -> int:
        """Send ``sig`` (None: just wait for the process to exit) and return its exit code."""
        if sig is not None and self.proc.returncode is None:
            self.proc.send_signal(sig)
        code = await asyncio.wait_for(self.proc.wait(), 60)
        if self.pump is not None:
            await self.pump
        return code

    @property
    def text(self) -> str:
        return self.output.decode(errors="replace")


async def wait_http(url: str, proc: Proc, timeout: float = 60) -> None:
    async with asyncio.timeout(timeout), httpx.AsyncClient() as http:
        while True:
            assert proc.proc.returncode is None, f"exited {proc.proc.returncode}:\n{proc.text}"
            try:
                if (await http.get(url)).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
