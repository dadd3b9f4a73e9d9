"""The composition root of the worker: which parts ``ingest worker`` serves.

A new feature adds its part factory here (and nowhere in ``workers/``).
"""

from __future__ import annotations

from workers.parts import PartFactory, core_part


def worker_parts() -> list[PartFactory]:
    """Every part of the production worker, in registration order."""
    from scheduler.part import cron_part
    from workers.approvals.part import approval_part
    from workers.flow.part import flow_part
    from workers.permits.part import permit_part

    return [core_part, cron_part, permit_part, approval_part, flow_part]
