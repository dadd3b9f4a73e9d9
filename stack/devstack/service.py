"""What every service of the local stack has: a folder and a process under INGEST_STACK_DIR."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from devstack.procs import Proc, StackError, port_open, port_owner, wait_for
from devstack.settings import HOST, StackSettings


@dataclass
class Service:
    """Base of :class:`~devstack.kafka.Kafka`, ``Temporal`` and ``Postgres``:
    each has ``ensure()`` ("started" or "already running"), ``stop()`` and ``answering()``."""

    cfg: StackSettings
    name: ClassVar[str]
    port_setting: ClassVar[str] = ""  # the StackSettings field of its port

    @property
    def address(self) -> str:
        return f"{HOST}:{getattr(self.cfg, self.port_setting)}"

    def handshake(self) -> bool:
        """A real exchange with the service (not just an open port)."""
        raise NotImplementedError

    def answering(self) -> bool:
        return port_open(HOST, getattr(self.cfg, self.port_setting)) and self.handshake()

    def already_running(self, what: str) -> bool:
        """It answers, or the process an earlier ``up`` started comes to answer within
        60 s (raises StackError if it does not); False: it has to be started."""
        if self.answering():
            return True
        if self.proc.pid() is not None:
            wait_for(self.answering, what, self.proc, 60)
            return True
        return False

    def require_free(self, setting: str, what: str) -> None:
        """Raise StackError naming ``INGEST_STACK_<SETTING>`` (and its owner) when the
        port of ``setting`` is taken: a service about to start must not share it."""
        port = getattr(self.cfg, setting)
        if port_open(HOST, port):
            owner = port_owner(port)
            raise StackError(
                f"port {port} (INGEST_STACK_{setting.upper()}) is taken"
                f"{f' by pid {owner}' if owner else ''}; free it or move {what}'s port"
            )

    @property
    def home(self) -> Path:
        return self.cfg.dir.resolve() / self.name

    @property
    def proc(self) -> Proc:
        return Proc(self.cfg.dir.resolve(), self.name)
