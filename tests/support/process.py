"""Environments for the pipeline processes a test starts."""

from __future__ import annotations

import os

from pipeline.settings import TemporalSettings
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
