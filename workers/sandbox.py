"""The workflow sandbox the worker runs its workflows in, and what it reloads per instance.

Temporal's sandbox executes a workflow's own module afresh for every workflow
instance (its module state stays per-instance) and loads every other module it is
not told to pass through afresh too. A module passed through is loaded once per
process and shared. The run's workflow modules (``workers.run_workflow``,
``workers.task_workflow``) import everything inside
``workflow.unsafe.imports_passed_through()``, so an instance costs one small
module; :func:`reloaded_modules` lists what an instance loads, for tests and
``bench.sandbox``.
"""

from __future__ import annotations

import sys
from types import ModuleType

import temporalio.converter
from temporalio.api.common.v1 import Payloads
from temporalio.api.failure.v1 import Failure
from temporalio.worker import WorkflowInstanceDetails
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions
from temporalio.worker.workflow_sandbox._restrictions import RestrictedModule
from temporalio.worker.workflow_sandbox._runner import _fake_info
from temporalio.workflow import _Definition

# Deterministic, side-effect-free at import, used by workflow code: never reload them.
PASSTHROUGH = ("schemas",)


def restrictions() -> SandboxRestrictions:
    return SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH)


def workflow_runner() -> SandboxedWorkflowRunner:
    """The runner of the worker (``workers.worker.build_worker``) and of replay tests."""
    return SandboxedWorkflowRunner(restrictions=restrictions())


def instance_details(workflow_class: type) -> WorkflowInstanceDetails:
    """What the SDK passes when it creates an instance (as in its own validation)."""
    conv = temporalio.converter.DataConverter.default
    return WorkflowInstanceDetails(
        payload_converter_factory=conv._new_payload_converter,
        failure_converter_class=conv.failure_converter_class,
        interceptor_classes=[],
        defn=_Definition.must_from_class(workflow_class),
        info=_fake_info,
        randomness_seed=-1,
        extern_functions={},
        disable_eager_activity_execution=False,
        worker_level_failure_exception_types=[],
        patch_activation_callback=None,
        last_completion_result=Payloads(),
        last_failure=Failure(),
    )


async def reloaded_modules(
    workflow_class: type, runner: SandboxedWorkflowRunner | None = None
) -> list[str]:
    """Modules one sandboxed instance of ``workflow_class`` executes anew (not passed through).

    Async only because an instance binds itself to the running event loop.
    """
    instance = (runner or workflow_runner()).create_instance(instance_details(workflow_class))
    loaded: dict[str, ModuleType] = instance.importer.new_modules  # type: ignore[attr-defined]
    out = []
    for name, mod in loaded.items():
        if name in ("sys", "builtins", "__main__"):
            continue
        if isinstance(mod, RestrictedModule):  # a passed-through module, wrapped
            mod = object.__getattribute__(mod, "__temporal_state").obj
        if mod is not sys.modules.get(name):
            out.append(name)
    return sorted(out)
