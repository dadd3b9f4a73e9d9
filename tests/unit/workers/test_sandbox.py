"""What the sandbox loads per workflow instance of the run's workflows.

The sandbox executes a workflow's module afresh per instance (and every module
it is not told to pass through). The worker passes the run's workflow modules
through (``WorkerPart.passthrough``), so an instance reloads nothing; without
that, only the workflow's own small module and its package.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support import ROOT
from tests.support.sandbox import reloaded_modules
from workers.parts import CORE_WORKFLOW_MODULES
from workers.run_workflow import RunActivityWorkflow
from workers.sandbox import workflow_runner
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
    assert await reloaded_modules(workflow_class, workflow_runner()) == ["workers", module]
    # as the worker runs it: the module is passed through as well, nothing is reloaded
    assert await reloaded_modules(workflow_class, workflow_runner(*CORE_WORKFLOW_MODULES)) == []


async def test_an_import_outside_the_passthrough_block_is_seen() -> None:
    # The check above can fail: a module imported outside the block is reloaded.
    from tests.unit.workers.sandbox_fixture import LeakyImportWorkflow

    got = await reloaded_modules(LeakyImportWorkflow, workflow_runner())
    assert "workers.options" in got
    assert "tests.unit.workers.sandbox_fixture" in got


async def test_instances_read_contexts_directly_unless_turned_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

    from tests.support.sandbox import instance_details
    from workers.sandbox import DirectContexts, SandboxRunner
    from workers.settings import WorkerSettings

    det = instance_details(TaskInstanceWorkflow)
    instance = workflow_runner(*CORE_WORKFLOW_MODULES).create_instance(det)
    # direct: the in-sandbox instance was found (an SDK change would make this False)
    assert isinstance(instance, DirectContexts) and instance.direct
    assert instance.get_serialization_context(None) == instance.sandboxed.get_serialization_context(
        None
    )
    plain = workflow_runner(*CORE_WORKFLOW_MODULES, direct_contexts=False)
    assert type(plain) is SandboxedWorkflowRunner and not isinstance(plain, SandboxRunner)
    assert not isinstance(plain.create_instance(det), DirectContexts)

    assert WorkerSettings().sandbox_direct_contexts is True
    monkeypatch.setenv("INGEST_SANDBOX_DIRECT_CONTEXTS", "false")
    assert WorkerSettings().sandbox_direct_contexts is False


def test_worker_imports_when_the_sdk_renames_its_internals() -> None:
    # The SDK's private modules and names the direct-context runner once imported,
    # emptied as a release that renames them would: the worker must still import
    # and build its runner (the direct path then falls back per instance).
    code = """
import sys, types
import temporalio.workflow
import temporalio.worker
import temporalio.worker.workflow_sandbox
for name in ("temporalio.worker._command_aware_visitor",
             "temporalio.worker.workflow_sandbox._restrictions",
             "temporalio.worker.workflow_sandbox._runner"):
    sys.modules[name] = types.ModuleType(name)
del temporalio.workflow._Definition
import workers.worker
from workers.sandbox import SandboxRunner, workflow_runner
assert isinstance(workflow_runner(), SandboxRunner)
print("imported")
"""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout.strip() == "imported", done.stderr[-2000:]


def test_an_instance_without_the_inner_one_answers_through_the_sandbox() -> None:
    from workers.sandbox import DirectContexts

    class Sandboxed:  # what an SDK that moved its in-sandbox instance would hand over
        def get_serialization_context(self, command_info: object) -> str:
            return "sandboxed"

    instance = DirectContexts(Sandboxed())  # type: ignore[arg-type]
    assert not instance.direct
    assert instance.get_serialization_context(None) == "sandboxed"
