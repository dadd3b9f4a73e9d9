"""The workflow sandbox the worker runs its workflows in, and what it reloads per instance.

Temporal's sandbox executes a workflow's own module afresh for every workflow
instance (its module state stays per-instance) and loads every other module it is
not told to pass through afresh too; a module passed through is loaded once per
process and shared. Reloading a workflow module and re-applying ``workflow.defn``
to its class costs 4-8 ms of the worker's event loop per instance (``python -m
bench.sandbox``), two instances per one-task run.

So the run's workflow modules (``workers.parts.CORE_WORKFLOW_MODULES``) are
passed through too (a part lists them in ``WorkerPart.passthrough``). That is
safe because they hold the workflow classes and no module state, and import
everything else inside ``workflow.unsafe.imports_passed_through()``, as the
workflow logic they call (pause-and-fix, approvals, permits) already was. What
is given up: a call like ``datetime.now()`` written directly in those two modules
is no longer caught by the sandbox (the determinism rules still apply; replay
tests still catch the effect). The sandbox's other protections (restricted
builtins, per-instance state of every other workflow) stay.
:func:`reloaded_modules` lists what an instance loads, for tests and ``bench.sandbox``.
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


def restrictions(*workflow_modules: str) -> SandboxRestrictions:
    return SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH, *workflow_modules)


def workflow_runner(*workflow_modules: str) -> SandboxedWorkflowRunner:
    """The runner of the worker (``workers.worker.build_worker``) and of replay tests,
    passing ``workflow_modules`` (the parts' ``passthrough``) through as well."""
    return SandboxedWorkflowRunner(restrictions=restrictions(*workflow_modules))


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
