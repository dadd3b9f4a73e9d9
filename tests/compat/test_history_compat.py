"""Histories written by earlier releases replay on today's workflow code.

Runs are long-lived (a paused task or an approval can wait for weeks), so a worker
upgrade meets histories its predecessor wrote. Each file under ``histories/<release>/``
was recorded by ``record_histories.py`` from that release; replaying it here with
the current ``RunActivityWorkflow`` and ``TaskInstanceWorkflow`` raises on any
non-deterministic change (a command added, removed or reordered for the same
input). A change that must alter the command sequence needs ``workflow.patched``.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from schemas.converter import DATA_CONVERTER
from workers.parts import CORE_WORKFLOW_MODULES
from workers.run_workflow import RunActivityWorkflow
from workers.sandbox import workflow_runner
from workers.task_workflow import TaskInstanceWorkflow

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*/*.json"))


def test_recorded_histories_exist() -> None:
    # Guards the parametrised test below from passing vacuously on an empty folder.
    assert len(HISTORIES) >= 6, HISTORIES


def _workflow_id(path: Path) -> str:
    """The recorded execution's own id (RunActivityWorkflow checks it against its input)."""
    started = json.loads(path.read_text())["events"][0]
    payload = started["workflowExecutionStartedEventAttributes"]["input"]["payloads"][0]
    inp = json.loads(base64.b64decode(payload["data"]))
    return str(inp.get("workflow_id") or inp["task_id"])


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: f"{p.parent.name}/{p.name}")
async def test_history_replays_on_current_code(path: Path) -> None:
    text = path.read_text()  # noqa: ASYNC240 (a small fixture file)
    history = WorkflowHistory.from_json(_workflow_id(path), text)
    replayer = Replayer(
        workflows=[RunActivityWorkflow, TaskInstanceWorkflow],
        workflow_runner=workflow_runner(*CORE_WORKFLOW_MODULES),
        data_converter=DATA_CONVERTER,  # what the worker's client decodes with
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure!r}"
