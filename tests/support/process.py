"""Environments for the pipeline processes a test starts, and ``python -m ingress`` itself."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from tests.support import ROOT

PIPELINE_PREFIXES = ("KAFKA_", "TEMPORAL_", "INGEST_")


def clean_env(**settings: str) -> dict[str, str]:
    """This process's environment without any pipeline setting, plus ``settings``: a child
    sees only what the test gives it, never a variable of the shell that ran pytest."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(PIPELINE_PREFIXES) and k != "DATABASE_URL"
    }
    env.update(settings)
    return env


def start_ingress(
    stack: Any, topics: Any, group: str, stderr: Any = subprocess.PIPE, **extra: str
) -> subprocess.Popen[bytes]:
    """``python -m ingress`` on the stack and the test's topics, consumer group ``group``,
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
        [sys.executable, "-m", "ingress"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=stderr,
    )
