"""The flags several ``ingest`` commands share, declared once.

Each row names a flag, the settings path it overrides (``section__field``, as
:func:`pipeline.settings.load_settings` takes it) and its help, which names the
environment variable. A command adds the rows it takes with :func:`add_flags`
(optionally with its own help wording) and turns the parsed values into
settings overrides with :func:`overrides`; a flag left unset keeps the
environment's value.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Flag:
    option: str
    setting: str
    help: str
    type: type | None = None

    @property
    def dest(self) -> str:
        return self.option.removeprefix("--").replace("-", "_")


FLAGS = {
    f.dest: f
    for f in (
        Flag("--temporal-address", "temporal__address", "host:port (env TEMPORAL_ADDRESS)"),
        Flag("--namespace", "temporal__namespace", "Temporal namespace (env TEMPORAL_NAMESPACE)"),
        Flag(
            "--task-queue", "temporal__task_queue", "workers' task queue (env TEMPORAL_TASK_QUEUE)"
        ),
        Flag(
            "--database-url",
            "database__url",
            "PostgreSQL DSN without a password (env DATABASE_URL; password: .pgpass or PGPASSWORD)",
        ),
        Flag(
            "--bootstrap-servers",
            "kafka__bootstrap_servers",
            "Kafka brokers (env KAFKA_BOOTSTRAP_SERVERS)",
        ),
        Flag("--raw-topic", "kafka__raw_topic", "raw topic(s) (env KAFKA_RAW_TOPIC)"),
        Flag("--events-topic", "kafka__events_topic", "events topic (env KAFKA_EVENTS_TOPIC)"),
        Flag("--dlq-topic", "kafka__dlq_topic", "dead-letter topic (env KAFKA_DLQ_TOPIC)"),
        Flag(
            "--metrics-port",
            "process__metrics_port",
            "/metrics port (env INGEST_METRICS_PORT)",
            int,
        ),
    )
}


def add_flags(p: argparse.ArgumentParser, *names: str, **helps: str) -> None:
    """Add the shared flags ``names`` (dest names) to ``p``; ``helps`` rewords one's help."""
    for name in names:
        f = FLAGS[name]
        kwargs: dict[str, Any] = {"help": helps.get(name, f.help)}
        if f.type is not None:
            kwargs["type"] = f.type
        p.add_argument(f.option, **kwargs)


def overrides(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """The settings overrides (``section__field=value``) of the shared flags ``names``.

    A ``--database-url`` that carries a password is refused (``ConfigError``: exit 2,
    one line): ``ps`` and shell history would show it; DATABASE_URL or .pgpass keep it.
    """
    from pipeline.db import refuse_password_on_command_line

    found = {FLAGS[name].setting: getattr(args, name) for name in names}
    refuse_password_on_command_line(found.get("database__url"))
    return found
