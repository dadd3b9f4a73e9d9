"""Continue-as-new for task workflows that loop (approval resubmissions, fix loops).

A ``TaskInstanceWorkflow`` that loops asks :func:`suggested` at a safe boundary
(between two waits, never in the middle of a step). When the server suggests it
(its history passed ``limit.historyCount.suggestContinueAsNew`` events or the size
limit), :func:`continue_task` waits until every update and signal handler has
finished, then continues as new with the same input plus a :class:`TaskCarry`:

* the workflow id, the task id of the contract, stays the same;
* the parent's ``execute_child_workflow`` follows the chain to its last run;
* ``run()`` sees ``inp.continued`` and skips the claim and "running" bookkeeping,
  which the first run did.

Workflow code: import it inside ``workflow.unsafe.imports_passed_through()``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import NoReturn

from temporalio import workflow

from schemas.workflow_io import TaskCarry, TaskInstanceInput


def suggested() -> bool:
    return workflow.info().is_continue_as_new_suggested()


def continued_runs(inp: TaskInstanceInput) -> int:
    """How many times this task has continued as new before this run."""
    return inp.continued.continued_runs if inp.continued is not None else 0


async def continue_task(inp: TaskInstanceInput, carry: Callable[[int], TaskCarry]) -> NoReturn:
    """Let handlers finish, then continue as new carrying ``carry(runs)``.

    ``carry`` is called after the handlers finished, so it sees their last changes.
    """
    await workflow.wait_condition(workflow.all_handlers_finished)
    runs = continued_runs(inp) + 1
    workflow.logger.info("task %s continues as new (run %d of its chain)", inp.task_id, runs + 1)
    workflow.continue_as_new(replace(inp, continued=carry(runs)))
