"""``ingest temporal setup``: register the pipeline's search attributes on a namespace
(:mod:`pipeline.temporal_setup` does the work; idempotent)."""

from __future__ import annotations

import argparse
import asyncio

from app.command import Command
from app.flags import add_flags, overrides
from pipeline import settings
from pipeline.clients import Unreachable, temporal_client
from pipeline.temporal_setup import KEYWORDS, register_search_attributes


async def _setup(cfg: settings.TemporalSettings) -> list[str]:
    client = await temporal_client(cfg)
    return await register_search_attributes(client, cfg.namespace)


def _run(args: argparse.Namespace) -> int:
    cfg = settings.load_settings(**overrides(args, "temporal_address", "namespace"))
    try:
        added = asyncio.run(_setup(cfg.temporal))
    except Unreachable as exc:
        print(f"ingest temporal setup: {exc}")
        return 1
    except Exception as exc:  # e.g. PERMISSION_DENIED on a managed namespace
        print(f"ingest temporal setup: registering search attributes failed: {exc}")
        return 1
    ns = cfg.temporal.namespace
    if added:
        print(f"namespace {ns}: registered search attributes {', '.join(added)} (Keyword)")
    else:
        print(f"namespace {ns}: search attributes {', '.join(KEYWORDS)} already registered")
    return 0


def _flags(p: argparse.ArgumentParser) -> None:
    add_flags(p, "temporal_address", "namespace")


COMMAND = Command(
    "temporal",
    help="prepare a Temporal namespace (search attributes); idempotent",
    description=(
        "temporal setup registers the custom Keyword search attributes "
        f"({', '.join(KEYWORDS)}) that paused tasks upsert and the ops service queries, "
        "through the operator service. Attributes already registered are left alone."
    ),
    actions=(
        Command(
            "setup",
            help="register the pipeline's search attributes (idempotent)",
            description="Register the pipeline's Keyword search attributes on the namespace.",
            run=_run,
            flags=_flags,
        ),
    ),
)
