"""``activities apply`` refuses a webhook credential written into a definition (it would
sit in the activities table and Temporal history) and warns about a URL's query."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from app.commands.activities import _check_webhooks
from definitions import files


def _file(*configs: dict[str, Any]) -> Any:
    doc = {
        "activities": [
            {
                "id": "550e8400-e29b-41d4-a716-446655440000",
                "name": "hook",
                "trigger": {"type": "event", "event_type": "t"},
                "tasks": [{"type": "noop"}] + [{"type": "webhook", "config": c} for c in configs],
            }
        ]
    }
    return files.parse(orjson.dumps(doc).decode(), ".json")


def test_a_literal_credential_header_is_refused_naming_the_task(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parsed = _file(
        {"url": "https://h.example/in", "headers_from_env": {"Authorization": "WEBHOOK_T"}},
        {"url": "https://h.example/in", "headers": {"Authorization": "Bearer hunter2"}},
    )
    with pytest.raises(files.FileError) as info:
        _check_webhooks("f.json", parsed)
    [problem] = info.value.problems
    assert problem.startswith("activities[0].tasks[2].config: headers['Authorization']")
    assert "hunter2" not in problem and "headers_from_env" in problem


def test_a_url_query_only_warns_and_hides_its_values(capsys: pytest.CaptureFixture[str]) -> None:
    _check_webhooks("f.json", _file({"url": "https://h.example/in?key=hunter2"}))
    err = capsys.readouterr().err
    assert "warning: activities[0].tasks[1].config: url" in err
    assert "hunter2" not in err
