"""``activities apply`` refuses a task type no handler serves, naming it and the known ones."""

from __future__ import annotations

import orjson
import pytest

from definitions import files
from schemas.definitions import ActivityFile

KNOWN = ("approval", "emit", "noop")


def _file(*types: str) -> ActivityFile:
    doc = {
        "activities": [
            {
                "id": "550e8400-e29b-41d4-a716-44665544000" + str(i),
                "name": f"a{i}",
                "trigger": {"type": "event", "event_type": "t"},
                "tasks": [{"type": t} for t in task_types],
            }
            for i, task_types in enumerate([types[:1], types[1:]])
        ]
    }
    return files.parse(orjson.dumps(doc).decode(), ".json")


def test_known_types_pass() -> None:
    files.check_task_types(_file("noop", "emit", "approval"), KNOWN)


def test_each_unknown_type_is_one_line_naming_it_and_the_known_types() -> None:
    with pytest.raises(files.FileError) as info:
        files.check_task_types(_file("nopo", "noop", "emitt"), KNOWN)
    assert info.value.problems == [
        "activities[0].tasks[0].type: no handler serves task type 'nopo'"
        " (known: approval, emit, noop)",
        "activities[1].tasks[1].type: no handler serves task type 'emitt'"
        " (known: approval, emit, noop)",
    ]
