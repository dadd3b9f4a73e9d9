"""What one sandboxed workflow instance loads, for the sandbox tests and ``bench.sandbox``.

Uses the SDK's private parts (its fake ``Info``, ``_Definition``, the sandbox's
``RestrictedModule``) to build an instance as the SDK does when it validates a
workflow: test and benchmark code only, so the worker never imports them.
"""

from __future__ import annotations

import sys
from types import ModuleType

import temporalio.converter
from temporalio.api.common.v1 import Payloads
from temporalio.api.failure.v1 import Failure
from temporalio.worker import WorkflowInstanceDetails
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner
from temporalio.worker.workflow_sandbox._restrictions import RestrictedModule
from temporalio.worker.workflow_sandbox._runner import _fake_info
from temporalio.workflow import _Definition

from workers.sandbox import DirectContexts, workflow_runner


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
    if isinstance(instance, DirectContexts):
        instance = instance.sandboxed
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
