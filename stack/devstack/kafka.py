"""The local Kafka: one KRaft node (broker and controller) run from the Maven broker jars.

``ensure()`` starts it unless it already answers ("started" or "already
running"), ``stop()`` stops it, ``answering()`` checks it. With ``INGEST_STACK_SECURE``
(``up --secure``) it has three TLS listeners too (:mod:`devstack.secure`), and with
``INGEST_STACK_KAFKA_PROXIED_PORT`` a PROXIED listener advertised at a Toxiproxy proxy
(:mod:`devstack.toxiproxy`); a broker of this stack that runs without them is restarted
with them. The jars are fetched
once with Maven; ``server.properties`` and the log4j config are written from
:mod:`devstack.templates` on every start.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from devstack import secure, toxiproxy
from devstack.maven import copy_jars
from devstack.procs import StackError, port_open, wait_for
from devstack.service import Service
from devstack.settings import HOST, StackSettings
from devstack.templates import template


@dataclass
class Kafka(Service):
    name = "kafka"
    port_setting = "kafka_port"

    def handshake(self) -> bool:
        return _kafka_handshake(self.address)

    def libs(self) -> Path:
        """Fetch the broker jars with Maven once; returns the folder of jars."""
        return self._fetch("kafka-pom.xml", f"libs-{self.cfg.kafka_version}", "broker jars")

    def tools(self) -> Path:
        """Fetch Kafka's command-line tools jar (``kafka-tools``, e.g. ``ConsoleProducer``)
        once; returns its folder. The jar alone: the broker jars of :meth:`libs` hold
        everything it needs, so the tools run on ``libs()/*`` plus ``tools()/*``. The
        broker itself never loads it."""
        self.libs()
        return self._fetch("kafka-tools-pom.xml", f"tools-{self.cfg.kafka_version}", "tools jar")

    def log_size(self, topic: str, bootstrap: str | None = None) -> int:
        """Bytes of ``topic``'s log segments on the brokers (every replica), as the
        brokers report them (``DescribeLogDirs``, through Kafka's ``LogDirsCommand``):
        what a topic costs on disk, compressed batches as they are stored."""
        res = subprocess.run(
            [
                _java(),
                "-cp",
                f"{self.libs()}/*:{self.tools()}/*",
                "org.apache.kafka.tools.LogDirsCommand",
                "--describe",
                "--bootstrap-server",
                bootstrap or self.address,
                "--topic-list",
                topic,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        found = [line for line in res.stdout.splitlines() if line.startswith("{")]
        if res.returncode != 0 or not found:
            raise StackError(f"describing the log dirs of {topic} failed:\n{res.stderr[-2000:]}")
        brokers = json.loads(found[-1])["brokers"]
        return sum(
            int(part["size"])
            for broker in brokers
            for log_dir in broker["logDirs"]
            for part in log_dir["partitions"]
            if part["partition"].rpartition("-")[0] == topic
        )

    def _fetch(self, pom_template: str, folder: str, what: str) -> Path:
        """The jars a pom from the templates names, copied into ``folder`` once."""
        version = self.cfg.kafka_version
        return copy_jars(
            self.home / pom_template,
            template(pom_template).format(version=version),
            self.home / folder,
            f"the Kafka {version} {what}",
            "check network access to Maven Central or set INGEST_STACK_KAFKA_VERSION",
        )

    def ensure(self) -> str:
        if self.already_running("Kafka"):
            missing = self.missing_listeners()
            if not missing:
                return "already running"
            if self.proc.pid() is None:
                flag = " --secure" if self.cfg.secure else ""
                env = " with INGEST_STACK_KAFKA_PROXIED_PORT set" * bool(
                    self.cfg.kafka_proxied_port
                )
                raise StackError(
                    f"the Kafka on {self.address} has no {missing} listener(s) and was not "
                    "started by this stack (INGEST_STACK_DIR): stop it, then `ingest stack "
                    f"up{flag}`{env}"
                )
            self.stop()  # restarted with its listeners: PLAINTEXT stays as it was
            state = f"restarted with its {missing} listener(s)"
        else:
            state = "started"
        java = _java()
        libs = self.libs()
        data = self.home / "data"
        props = self.home / "server.properties"
        props.write_text(render_properties(self.cfg, data))
        cp = f"{libs}/*"
        formatted_now = False
        if not (data / "meta.properties").exists():
            cluster_id = _kafka_cluster_id()
            scram = ["--add-scram", secure.scram_credential(self.cfg)] if self.cfg.secure else []
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
                    *scram,
                ],
                capture_output=True,
                text=True,
            )
            if res.returncode != 0:
                raise StackError(f"formatting Kafka storage failed:\n{res.stdout}{res.stderr}")
            formatted_now = True
            self._scram_marker.unlink(missing_ok=True)
            if self.cfg.secure:
                self._scram_marker.write_text(secure.scram_fingerprint(self.cfg))
        log4j = self.home / "log4j2.properties"
        log4j.write_text(template("log4j2.properties"))
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

        def check() -> bool:
            return self.answering() and not self.missing_listeners()

        wait_for(check, "Kafka", self.proc, self.cfg.kafka_start_timeout_seconds)
        if self.cfg.secure and not formatted_now:
            self.ensure_scram_user()
        return state

    def secure_answering(self) -> bool:
        """PLAINTEXT answers and every secure listener accepts connections."""
        return self.answering() and all(
            port_open(HOST, x.port) for x in secure.kafka_listeners(self.cfg)
        )

    def missing_listeners(self) -> str:
        """The opt-in listeners this broker should have and does not accept connections
        on: ``secure`` (``cfg.secure``), ``PROXIED`` (``cfg.kafka_proxied_port``), or ""."""
        missing = []
        if self.cfg.secure and not self.secure_answering():
            missing.append("secure")
        if self.cfg.kafka_proxied_port:
            missing += [
                name
                for i, name in enumerate(toxiproxy.KAFKA_LISTENERS)
                if not port_open(HOST, self.cfg.kafka_proxied_listen_port + i)
            ]
        return ", ".join(missing)

    @property
    def _scram_marker(self) -> Path:
        return self.home / "scram-users"

    def ensure_scram_user(self) -> None:
        """Set the SCRAM user's credential through the running broker (Kafka's
        ConfigCommand on PLAINTEXT) unless it was set from the current password: a data
        directory formatted before ``--secure``, or a new password file."""
        want = secure.scram_fingerprint(self.cfg)
        marker = self._scram_marker
        if marker.exists() and marker.read_text() == want:
            return
        password = secure.scram_password(self.cfg)
        res = subprocess.run(
            [
                _java(),
                "-cp",
                f"{self.libs()}/*",
                "kafka.admin.ConfigCommand",
                "--bootstrap-server",
                self.address,
                "--alter",
                "--add-config",
                f"{secure.SCRAM_MECHANISM}=[password={password}]",
                "--entity-type",
                "users",
                "--entity-name",
                secure.SCRAM_USER,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if res.returncode != 0:
            raise StackError(
                f"creating the Kafka SCRAM user {secure.SCRAM_USER} failed:\n"
                f"{(res.stdout + res.stderr)[-2000:]}"
            )
        marker.write_text(want)

    def stop(self) -> bool:
        return self.proc.stop(timeout=30)


def render_properties(cfg: StackSettings, data: Path) -> str:
    """``server.properties`` of the single node; with ``cfg.secure`` its secure
    listeners too (:mod:`devstack.secure`), with ``cfg.kafka_proxied_port`` its PROXIED
    listener (:mod:`devstack.toxiproxy`), PLAINTEXT and CONTROLLER unchanged."""
    listeners, protocols = secure.kafka_listener_fields(cfg) if cfg.secure else ("", "")
    advertised = listeners
    if cfg.kafka_proxied_port:
        more, more_advertised, more_protocols = toxiproxy.kafka_listener_fields(cfg)
        listeners, advertised = listeners + more, advertised + more_advertised
        protocols += more_protocols
    return template("server.properties").format(
        host=HOST,
        port=cfg.kafka_port,
        cport=cfg.kafka_controller_port,
        data=data,
        listeners=listeners,
        advertised=advertised,
        protocols=protocols,
        secure=secure.kafka_properties(cfg) if cfg.secure else "",
    )


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


def _kafka_cluster_id(uuid4: Callable[[], uuid.UUID] = uuid.uuid4) -> str:
    """A random KRaft cluster id, as Kafka's own ``Uuid.randomUuid`` makes one.

    Like Kafka, never one that starts with ``-`` (1 in 64 of them would): the
    storage tool's ``-t ID`` would read it as an option and refuse to format.
    """
    import base64

    while True:
        cid = base64.urlsafe_b64encode(uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


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
