"""Permit definitions, planning, backoff and the ctx.permit fencing check (no services)."""

from __future__ import annotations

from typing import Any

import pytest

from definitions.files import FileError, parse
from schemas.definitions import ActivityFile, TaskDef
from schemas.workflow_io import PermitGrant, PermitRequest
from workers.handlers import PermanentTaskError
from workers.permits.fencing import Permit, StalePermitError, permit_for
from workers.permits.semaphore import backoff_delay
from workers.permits.workflow import lease_grace
from workers.planning import plan

from .test_planning import RUN

ACT: dict[str, Any] = {
    "id": "5b1f7a0e-0000-4000-8000-000000000001",
    "name": "a",
    "trigger": {"type": "event", "event_type": "x"},
    "tasks": [{"type": "noop", "permit": {"resource": "partner-api", "lease_seconds": 30}}],
}


def test_resources_and_task_permits_validate() -> None:
    f = ActivityFile.model_validate(
        {"activities": [ACT], "resources": [{"name": "partner-api", "capacity": 3}]}
    )
    r = f.resources[0]
    assert (r.capacity, r.lease_seconds, r.backoff_seconds, r.max_backoff_seconds) == (
        3, 600, 5.0, 60.0,
    )  # fmt: skip
    assert f.activities[0].tasks[0].permit is not None


@pytest.mark.parametrize(
    ("resources", "where"),
    [
        ([{"name": "p", "capacity": 0}], "resources[0].capacity"),
        ([{"name": "a:b", "capacity": 1}], "resources[0].name"),
        ([{"name": "p", "capacity": 1, "lease_seconds": 0}], "resources[0].lease_seconds"),
        ([{"name": "p", "capacity": 1}, {"name": "p", "capacity": 2}], "resources"),
    ],
)
def test_bad_resources_name_the_field(resources: list[dict[str, object]], where: str) -> None:
    import json

    with pytest.raises(FileError) as err:
        parse(json.dumps({"activities": [], "resources": resources}), ".json")
    assert any(p.startswith(f"{where}:") for p in err.value.problems), err.value.problems


def test_plan_carries_the_permit() -> None:
    specs = plan([TaskDef.model_validate(ACT["tasks"][0]), TaskDef(type="noop")], RUN)
    assert specs[0].permit == PermitRequest("partner-api", 30)
    assert specs[1].permit is None


def test_backoff_doubles_and_caps() -> None:
    assert [backoff_delay(i, 5, 60) for i in range(6)] == [5, 10, 20, 40, 60, 60]
    assert backoff_delay(10_000, 0.2, 1) == 1


def test_lease_grace_bounds() -> None:
    assert (lease_grace(2), lease_grace(100), lease_grace(36_000)) == (1.0, 10.0, 60.0)


async def test_check_rejects_only_a_lower_token() -> None:
    async def current() -> int | None:
        return 5

    await Permit("r", "0", 5, "run", current).check()
    with pytest.raises(StalePermitError, match="token 4 is stale"):
        await Permit("r", "0", 4, "run", current).check()
    assert issubclass(StalePermitError, PermanentTaskError)  # fails the task, no retry
    assert Permit("r", "1", 7, "run", current).headers() == {
        "Fencing-Token": "7", "Fencing-Resource": "r/1",
    }  # fmt: skip
    assert permit_for(None, None) is None  # type: ignore[arg-type]
    assert permit_for(None, PermitGrant("r", "0", 1, "x")) is not None  # type: ignore[arg-type]


def test_the_listing_counts_a_slot_held_as_the_permits_do() -> None:
    # router/flow/concurrency_view.py cannot import workers/: it repeats the rule.
    from router.flow.concurrency_view import _HELD
    from workers.permits.store import HELD

    assert _HELD == HELD
