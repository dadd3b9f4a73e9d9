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

The runner is the SDK's sandboxed runner with one change (:class:`SandboxRunner`):
the serialization context of a payload is read from the workflow instance
directly instead of through the sandbox. temporalio 1.35 asks for that context
for every payload sequence it visits, three times on the way in and four on the
way out, codec or not, and each sandboxed answer costs an ``exec`` of a code
string under the sandbox's import hooks: 48-86 µs a call against 0.8-1.5 µs
read directly (``python -m bench.sandbox``), at 43 look-ups per one-task run and
118 per four-task run (``python -m bench.e2e.profile``). The answer
is a pure read of the instance's pending commands and info: no import, no clock,
no randomness, nothing the sandbox guards against; the workflow code itself still
runs inside the sandbox on every activation.
"""

from __future__ import annotations

import sys
from types import ModuleType

import temporalio.converter
import temporalio.workflow
from temporalio.api.common.v1 import Payloads
from temporalio.api.failure.v1 import Failure
from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.converter import StorageDriverStoreContext
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails
from temporalio.worker._command_aware_visitor import CommandInfo
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions
from temporalio.worker.workflow_sandbox._restrictions import RestrictedModule
from temporalio.worker.workflow_sandbox._runner import _fake_info
from temporalio.workflow import _Definition

# Deterministic, side-effect-free at import, used by workflow code: never reload them.
PASSTHROUGH = ("schemas",)


def restrictions(*workflow_modules: str) -> SandboxRestrictions:
    return SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH, *workflow_modules)


class SandboxRunner(SandboxedWorkflowRunner):
    """The SDK's sandboxed runner whose instances answer serialization-context
    questions without entering the sandbox (see the module docstring)."""

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return DirectContexts(super().create_instance(det))


class DirectContexts(WorkflowInstance):
    """A sandboxed instance; context look-ups go straight to the instance inside.

    The in-sandbox instance is the SDK's ``_WorkflowInstanceImpl``, held by the
    sandbox's ``InSandbox`` object in the sandbox globals. Should an SDK release
    move it, every look-up falls back to the sandboxed path: slower, never wrong
    (``tests/unit/workers/test_sandbox.py`` fails first, on the version bump).
    """

    def __init__(self, sandboxed: WorkflowInstance) -> None:
        self.sandboxed = sandboxed
        in_sandbox = getattr(sandboxed, "globals_and_locals", {}).get("__temporal_in_sandbox")
        inner = getattr(in_sandbox, "instance", None)
        self.direct = inner is not None
        self._contexts: WorkflowInstance = inner if inner is not None else sandboxed

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        return self.sandboxed.activate(act)

    def get_info(self) -> temporalio.workflow.Info:
        return self.sandboxed.get_info()

    def get_thread_id(self) -> int | None:
        return self.sandboxed.get_thread_id()

    def get_serialization_context(
        self, command_info: CommandInfo | None
    ) -> temporalio.converter.SerializationContext | None:
        return self._contexts.get_serialization_context(command_info)

    def get_external_store_context(
        self, command_info: CommandInfo | None
    ) -> StorageDriverStoreContext:
        return self._contexts.get_external_store_context(command_info)


def workflow_runner(
    *workflow_modules: str, direct_contexts: bool = True
) -> SandboxedWorkflowRunner:
    """The runner of the worker (``workers.worker.build_worker``) and of replay tests,
    passing ``workflow_modules`` (the parts' ``passthrough``) through as well;
    ``direct_contexts=False`` gives the SDK's runner unchanged."""
    runner = SandboxRunner if direct_contexts else SandboxedWorkflowRunner
    return runner(restrictions=restrictions(*workflow_modules))


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
