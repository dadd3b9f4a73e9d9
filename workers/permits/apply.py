"""The permits step of ``ingest activities apply``: check references, upsert resources.

Kept apart from the activity upsert so the command only calls one function. A
task's ``permit.resource`` must be declared in the same file or already stored;
otherwise nothing is written and each bad reference is named.
"""

from __future__ import annotations

import asyncpg

from schemas.definitions import ActivityFile
from schemas.errors import IngestError
from workers.permits import store


class UnknownResources(IngestError):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


async def check_references(pool: asyncpg.Pool, parsed: ActivityFile) -> None:
    """Raise :class:`UnknownResources` naming every task whose resource is not declared."""
    refs = [
        (f"activities[{i}].tasks[{j}].permit.resource", t.permit.resource)
        for i, a in enumerate(parsed.activities)
        for j, t in enumerate(a.tasks)
        if t.permit is not None
    ]
    declared = {r.name for r in parsed.resources}
    missing = {name for _, name in refs} - declared
    if missing:
        missing -= await store.known_resources(pool, missing)
    problems = [
        f"{where}: resource {name!r} is not declared (add it under `resources:`)"
        for where, name in refs
        if name in missing
    ]
    if problems:
        raise UnknownResources(problems)


async def apply_resources(pool: asyncpg.Pool, parsed: ActivityFile) -> list[str]:
    """Upsert the file's resources; one output line each."""
    results = await store.upsert_resources(pool, parsed.resources)
    return [
        f"{result:<8} resource {r.name} (capacity {r.capacity}, lease {r.lease_seconds}s)"
        for r, result in zip(parsed.resources, results, strict=True)
    ]
