"""The check ``activities apply`` can make (``definitions.files.check_run_sizes``): an
event activity whose run's plan, one copy of the event per task, cannot stay under
Temporal's payload limit for the largest event ingress admits, in one line."""

from __future__ import annotations

import orjson
import pytest

from definitions import files


def _parsed(*activities: dict[str, object]) -> files.ActivityFile:
    doc = {
        "activities": [
            {"id": f"550e8400-e29b-41d4-a716-44665544000{i}", "name": f"a{i}", **a}
            for i, a in enumerate(activities)
        ]
    }
    return files.parse(orjson.dumps(doc).decode(), ".json")


EVENT = {"type": "event", "event_type": "t"}
CRON = {"type": "cron", "cron": "* * * * *"}


def test_two_tasks_fit_the_default_limit_and_three_do_not() -> None:
    parsed = _parsed(
        {"trigger": EVENT, "tasks": [{"type": "noop"}] * 2},
        {"trigger": EVENT, "tasks": [{"type": "noop"}, {"type": "noop", "count": 2}]},
        {"trigger": CRON, "tasks": [{"type": "noop", "count": 50}]},  # no event to carry
    )
    with pytest.raises(files.FileError) as info:
        files.check_run_sizes(parsed, 1_000_000)
    assert info.value.problems == [
        "activities[1].tasks: 3 tasks each carry the event: 3 x 1000000 bytes"
        " (INGEST_MAX_EVENT_BYTES) make a 3003150-byte plan, over Temporal's 2097152-byte"
        " payload limit; use at most 2 tasks, or INGEST_MAX_EVENT_BYTES <= 698000"
    ]


def test_a_lower_event_limit_admits_more_tasks_and_the_tasks_own_payload_counts() -> None:
    parsed = _parsed({"trigger": EVENT, "tasks": [{"type": "noop", "count": 3}]})
    files.check_run_sizes(parsed, 698_000)
    with pytest.raises(files.FileError):
        files.check_run_sizes(parsed, 698_001)
    big = {"type": "noop", "payload": {"template": "x" * 300_000}}
    with pytest.raises(files.FileError):
        files.check_run_sizes(_parsed({"trigger": EVENT, "tasks": [big] * 3}), 400_000)
