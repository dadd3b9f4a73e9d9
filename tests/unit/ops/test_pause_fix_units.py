"""Pure parts of pause-and-fix and the ops service: merge patch, on_failure defaults,
start-up refusal."""

from __future__ import annotations

import uuid

import pytest
from pydantic import SecretStr

from ops.settings import OpsSettings, startup_problem
from pipeline.temporal_setup import start_dev_flags
from schemas.definitions import ActivityDef
from schemas.workflow_io import RunActivityInput
from workers.merge_patch import PatchError, check_patch, merge_patch
from workers.planning import plan

LONG = "t0ken-" + "x" * 32


def test_merge_patch_follows_rfc_7396() -> None:
    target = {"a": "b", "c": {"d": "e", "f": "g"}}
    assert merge_patch(target, {"a": "z", "c": {"f": None}}) == {"a": "z", "c": {"d": "e"}}
    assert merge_patch({"a": [1, 2]}, {"a": [3]}) == {"a": [3]}
    assert merge_patch({"a": 1}, {"b": {"c": None}}) == {"a": 1, "b": {}}
    assert target == {"a": "b", "c": {"d": "e", "f": "g"}}  # not mutated


@pytest.mark.parametrize(
    ("patch", "says"),
    [
        ([1], "patch must be a JSON object"),
        ("x", "patch must be a JSON object"),
        ({}, "patch is empty"),
        ({"event": None}, "patch.event: the trigger context cannot be patched"),
        ({"amount": 1}, "changes nothing"),
    ],
)
def test_check_patch_names_the_problem(patch: object, says: str) -> None:
    with pytest.raises(PatchError, match=says):
        check_patch(patch, {"amount": 1})


def test_check_patch_returns_the_patched_payload() -> None:
    assert check_patch({"amount": 2, "x": None}, {"amount": 1, "x": 0}) == {"amount": 2}


def _activity(**extra: object) -> ActivityDef:
    return ActivityDef.model_validate({
        "id": str(uuid.uuid4()), "name": "a", "trigger": {"type": "event", "event_type": "t"},
        "tasks": [{"type": "noop"}, {"type": "emit", "on_failure": "fail"}], **extra,
    })  # fmt: skip


def test_on_failure_defaults_to_fail_and_the_activity_default_fills_unset_tasks() -> None:
    assert [t.on_failure for t in _activity().tasks] == ["fail", "fail"]
    paused = _activity(on_failure="pause")
    assert [t.on_failure for t in paused.tasks] == ["pause", "fail"]
    # What `activities apply` stores is what plan_tasks reads back: the policy stays.
    stored = [t.model_dump(mode="json") for t in paused.tasks]
    assert ActivityDef.model_validate({**paused.model_dump(mode="json"), "on_failure": "fail",
                                       "tasks": stored}).tasks[0].on_failure == "pause"  # fmt: skip
    run = RunActivityInput(str(paused.id), "wf", "r", "event", "e", {"type": "t"})
    assert [s.on_failure for s in plan(paused.tasks, run)] == ["pause", "fail"]


def test_on_failure_rejects_other_values() -> None:
    with pytest.raises(ValueError, match="on_failure"):
        _activity(on_failure="retry")


def test_ops_refuses_to_start_without_a_token_unless_insecure_on_localhost() -> None:
    """(The guard's own tests: tests/unit/ops/test_guard.py, test_identity.py.)"""
    assert "INGEST_OPS_TOKEN is not set" in str(startup_problem(OpsSettings(token=None), False))
    assert startup_problem(OpsSettings(token=None, host="127.0.0.1"), True) is None
    assert "--insecure-local needs" in str(startup_problem(OpsSettings(host="0.0.0.0"), True))
    assert startup_problem(OpsSettings(token=SecretStr(LONG), host="0.0.0.0"), False) is None
    assert LONG not in repr(OpsSettings(token=SecretStr(LONG)))


def test_start_dev_registers_the_three_keyword_attributes() -> None:
    assert start_dev_flags() == [
        "--search-attribute", "IngestStatus=Keyword",
        "--search-attribute", "IngestFailedTask=Keyword",
        "--search-attribute", "IngestActivityId=Keyword",
    ]  # fmt: skip
