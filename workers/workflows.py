"""The run's two workflows, by their historical import path.

Each class lives in its own small module (``workers.run_workflow``,
``workers.task_workflow``) because the workflow sandbox re-executes a workflow's
module for every instance; this module only re-exports them for importers. The
workflow sandbox never loads it.
"""

from workers.run_workflow import RunActivityWorkflow
from workers.steps import describe
from workers.task_workflow import TaskInstanceWorkflow

__all__ = ["RunActivityWorkflow", "TaskInstanceWorkflow", "describe"]
