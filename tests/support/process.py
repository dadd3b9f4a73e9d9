"""Environments for the pipeline processes a test starts, and ``python -m app.commands ingress``."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from pipeline.settings import TemporalSettings
from tests.support import ROOT
from tests.support.namespaces import namespace_for

PIPELINE_PREFIXES = ("KAFKA_", "TEMPORAL_", "INGEST_")


def clean_env(**settings: str) -> dict[str, str]:
    """This process's environment without any pipeline setting, plus ``settings``: a child
    sees only what the test gives it, never a variable of the shell that ran pytest.

    Unless ``settings`` names one, ``TEMPORAL_NAMESPACE`` is the session's own namespace
    when the child talks to the shared stack's Temporal (``tests.support.namespaces``)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(PIPELINE_PREFIXES) and k != "DATABASE_URL"
    }
    env.update(settings)
    address = env.get("TEMPORAL_ADDRESS", TemporalSettings.model_fields["address"].default)
    env.setdefault("TEMPORAL_NAMESPACE", namespace_for(address))
    return env


def start_ingress(
    stack: Any, topics: Any, group: str, stderr: Any = subprocess.PIPE, **extra: str
) -> subprocess.Popen[bytes]:
    """``python -m app.commands ingress`` on the stack and the test's topics, group ``group``,
    no /metrics port; ``extra`` adds (or overrides) environment variables."""
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": stack.kafka,
        "KAFKA_RAW_TOPIC": topics.raw,
        "KAFKA_EVENTS_TOPIC": topics.events,
        "KAFKA_DLQ_TOPIC": topics.dlq,
        "INGEST_METRICS_PORT": "0",
        "INGEST_INGRESS_GROUP": group,
        **extra,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "app.commands", "ingress"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=stderr,
    )


def router_env(cfg: Any, group: str, port: int, **extra: str) -> dict[str, str]:
    """The environment of an ``ingest router`` on ``cfg``'s stack, topics, task queue and
    database, consumer group ``group``, /metrics on ``port``; ``extra`` adds variables."""
    return {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": cfg.kafka.bootstrap_servers,
        "KAFKA_EVENTS_TOPIC": cfg.kafka.events_topic,
        "KAFKA_DLQ_TOPIC": cfg.kafka.dlq_topic,
        "TEMPORAL_ADDRESS": cfg.temporal.address,
        "TEMPORAL_TASK_QUEUE": cfg.temporal.task_queue,
        "DATABASE_URL": cfg.database.url.get_secret_value(),
        "INGEST_ROUTER_GROUP": group,
        "INGEST_METRICS_PORT": str(port),
        **extra,
    }


async def spawn_router(env: dict[str, str]) -> asyncio.subprocess.Process:
    """``ingest router`` as a real process in ``env``; stdout and stderr on one pipe."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app.cli",
        "router",
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )


def hide_codecs(folder: Path) -> dict[str, str]:
    """The environment of a process whose ``import cramjam`` fails, as on an install
    without aiokafka's codec extras (it then reads no snappy, lz4 or zstd batch): a
    module of that name that raises ImportError, written to ``folder``, first on its path."""
    (folder / "cramjam.py").write_text("raise ImportError('cramjam hidden by the test')\n")
    return {"PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", str(ROOT))])}
