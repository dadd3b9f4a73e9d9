"""The workflow sandbox the worker runs its workflows in, and what it reloads per instance.

Temporal's sandbox executes a workflow's own module afresh for every workflow
instance (its module state stays per-instance) and loads every other module it is
not told to pass through afresh too; a module passed through is loaded once per
process and shared. Reloading a workflow module and re-applying ``workflow.defn``
to its class costs the worker's event loop milliseconds per instance, and a
one-task run has two instances (figures: docs/benchmarks.md, ``python -m
bench.sandbox``).

So the run's workflow modules (``workers.parts.CORE_WORKFLOW_MODULES``) are
passed through too (a part lists them in ``WorkerPart.passthrough``). That is
safe because they hold the workflow classes and no module state, and import
everything else inside ``workflow.unsafe.imports_passed_through()``, as the
workflow logic they call (pause-and-fix, approvals, permits) already was. What
is given up: a call like ``datetime.now()`` written directly in those two modules
is no longer caught by the sandbox (the determinism rules still apply; replay
tests still catch the effect). The sandbox's other protections (restricted
builtins, per-instance state of every other workflow) stay.
``tests.support.sandbox.reloaded_modules`` lists what an instance loads, for the
tests and ``bench.sandbox``.

The runner is the SDK's sandboxed runner with one change (:class:`SandboxRunner`):
the serialization context of a payload is read from the workflow instance
directly instead of through the sandbox. The SDK asks for that context for every
payload sequence it visits, on the way in and on the way out, codec or not, and
each sandboxed answer runs an ``exec`` of a code string under the sandbox's
import hooks, tens of times per run; read directly it is a plain method call
(figures: docs/benchmarks.md, "Serialization contexts read directly"). The answer
is a pure read of the instance's pending commands and info: no import, no clock,
no randomness, nothing the sandbox guards against; the workflow code itself still
runs inside the sandbox on every activation.

Nothing private of the SDK is imported at run time (only for annotations), so an
SDK release that renames its internals cannot break ``ingest worker`` at import:
the direct path reads the in-sandbox instance with ``getattr`` and falls back to
the SDK's own sandboxed answer when it is not there. temporalio is pinned to the
tested minor release (pyproject.toml; ``tests/unit/test_dependency_pins.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import temporalio.converter
import temporalio.workflow
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

if TYPE_CHECKING:  # annotations only: a private module, and types new in temporalio 1.24
    from temporalio.bridge.proto.workflow_activation import WorkflowActivation
    from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
    from temporalio.converter import StorageDriverStoreContext
    from temporalio.worker._command_aware_visitor import CommandInfo

# Deterministic, side-effect-free at import, used by workflow code: never reload them.
# opentelemetry: the tracing interceptor's workflow side (pipeline/tracing.py) uses it.
PASSTHROUGH = ("schemas", "opentelemetry")


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
