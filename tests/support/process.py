"""Environments for the pipeline processes a test starts."""

from __future__ import annotations

import os

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
