"""The one place the ops service calls the replay code (``POST /api/replay``).

Kept to one small function, the ops side of the ``replay`` package: the request runs
through :func:`replay.request.run_request`, as ``ingest replay`` does, with the
router's settings from the environment. The report is the same object
``ingest replay --json`` prints (``ReplayReport.as_dict()``).
"""

from __future__ import annotations

from typing import Any

import asyncpg
from temporalio.client import Client

from pipeline.settings import Settings
from replay.request import ReplayRequest, run_request
from replay.session import ReplayError
from router.settings import load_router_settings

__all__ = ["ReplayError", "ReplayRequest", "run_replay"]


async def run_replay(
    settings: Settings, client: Client, pool: asyncpg.Pool, req: ReplayRequest
) -> dict[str, Any]:
    """Run it to the end and return the ``--json`` report. Raises ReplayError."""
    report = await run_request(settings, load_router_settings(), req, client=client, pool=pool)
    return report.as_dict()
