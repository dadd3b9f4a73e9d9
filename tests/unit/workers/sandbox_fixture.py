"""A workflow that imports a project module outside the passthrough block (test_sandbox)."""

from __future__ import annotations

from temporalio import workflow

from workers.options import handler_options


@workflow.defn(name="SandboxFixtureWorkflow")
class LeakyImportWorkflow:
    @workflow.run
    async def run(self) -> int:
        return handler_options({}).max_attempts
