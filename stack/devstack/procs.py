"""Detached service processes tracked by pid files under ``.stack/run/``.

``up`` starts a process in its own session (so Ctrl-C in the caller's
terminal does not reach it) with stdout/stderr in ``.stack/logs/NAME.log``.
``down`` only signals processes whose pid file this stack wrote.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from schemas.errors import IngestError


class StackError(IngestError):
    """A service could not be started; the message says what to do."""


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited child not yet reaped) still answers kill(0).
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return True


class Proc:
    def __init__(self, stack_dir: Path, name: str) -> None:
        self.name = name
        self.pidfile = stack_dir / "run" / f"{name}.pid"
        self.logfile = stack_dir / "logs" / f"{name}.log"

    def pid(self) -> int | None:
        try:
            pid = int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if pid_alive(pid) else None

    def start(self, argv: list[str], env: dict[str, str] | None = None) -> int:
        self.pidfile.parent.mkdir(parents=True, exist_ok=True)
        self.logfile.parent.mkdir(parents=True, exist_ok=True)
        with open(self.logfile, "ab") as log:
            proc = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, **(env or {})},
            )
        self.pidfile.write_text(str(proc.pid))
        return proc.pid

    def stop(self, timeout: float = 20) -> bool:
        """SIGTERM the process group, SIGKILL after ``timeout``. False if not ours/running."""
        pid = self.pid()
        if pid is None:
            self.pidfile.unlink(missing_ok=True)
            return False
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and pid_alive(pid):
            time.sleep(0.2)
        if pid_alive(pid):
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.pidfile.unlink(missing_ok=True)
        return True

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.logfile.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def wait_for(check, what: str, proc: Proc, timeout: float) -> None:  # type: ignore[no-untyped-def]
    """Poll ``check()`` until true; fail with the log tail if the process dies or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if proc.pid() is None:
            raise StackError(f"{what} exited during start-up; last log lines:\n{proc.tail()}")
        time.sleep(0.3)
    raise StackError(f"{what} did not answer within {timeout:.0f}s; see {proc.logfile}")


def port_owner(port: int) -> int | None:
    """The pid of the process listening on TCP ``port`` (Linux ``/proc``), or None.

    A health check that passes proves only that something serves the port; a stack
    that starts a server checks that this something is the process it started.
    """
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            # local_address is HEXIP:HEXPORT; state 0A is LISTEN.
            if len(cols) > 9 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{cols[9]}]")
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fds = list((proc / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd) in inodes:
                    return int(proc.name)
            except OSError:
                continue
    return None
