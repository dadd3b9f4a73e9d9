"""Each sandboxed workflow instance reloads only its own small module.

The sandbox executes a workflow's module afresh per instance (and every module
it is not told to pass through); the run's workflows keep that to one module,
so a run pays for two small module loads, not for the whole worker's imports.
"""

from __future__ import annotations

import pytest

from workers.run_workflow import RunActivityWorkflow
from workers.sandbox import reloaded_modules
from workers.task_workflow import TaskInstanceWorkflow


@pytest.mark.parametrize(
    ("workflow_class", "module"),
    [
        (RunActivityWorkflow, "workers.run_workflow"),
        (TaskInstanceWorkflow, "workers.task_workflow"),
    ],
)
async def test_an_instance_reloads_only_its_own_module(workflow_class: type, module: str) -> None:
    assert workflow_class.__module__ == module
    assert await reloaded_modules(workflow_class) == ["workers", module]


async def test_an_import_outside_the_passthrough_block_is_seen() -> None:
    # The check above can fail: a module imported outside the block is reloaded.
    from tests.unit.workers.sandbox_fixture import LeakyImportWorkflow

    got = await reloaded_modules(LeakyImportWorkflow)
    assert "workers.options" in got
    assert "tests.unit.workers.sandbox_fixture" in got


def test_old_import_path_still_works() -> None:
    from workers import workflows

    assert workflows.RunActivityWorkflow is RunActivityWorkflow
    assert workflows.TaskInstanceWorkflow is TaskInstanceWorkflow
