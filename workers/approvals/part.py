"""The approvals worker part: the approval activities, the waiting gauge refresher, and
the sweep that closes approvals whose workflow was terminated (``sweep.py``).

The wait itself runs in ``TaskInstanceWorkflow`` (core part); a worker that runs
approval tasks must also serve this part (``app.parts`` adds it to
``ingest worker``), or their notices and audit writes find no activity.
"""

from __future__ import annotations

import asyncio
import logging

from workers.approvals.activities import ApprovalActivities, start_metrics_at_zero
from workers.approvals.sweep import sweep
from workers.parts import PartDeps, WorkerPart

log = logging.getLogger(__name__)

# How often each worker sweeps for approvals left open by a terminated workflow and
# sets pipeline_approvals_waiting from PostgreSQL (also set after every audit write).
GAUGE_REFRESH_SECONDS = 15.0


def approval_part(deps: PartDeps) -> WorkerPart:
    start_metrics_at_zero()
    acts = ApprovalActivities(deps.pool, deps.resources)

    async def refresh() -> None:
        while True:
            try:
                await sweep(deps.client, deps.pool)
            except Exception as exc:  # database or Temporal down: try again later
                log.warning("could not sweep the open approvals: %s", exc)
            try:
                await acts.refresh_gauge()
            except Exception as exc:  # the database is down: keep the last value, try later
                log.warning("could not refresh pipeline_approvals_waiting: %s", exc)
            await asyncio.sleep(GAUGE_REFRESH_SECONDS)

    return WorkerPart("approvals", activities=acts.all(), background=[refresh])
