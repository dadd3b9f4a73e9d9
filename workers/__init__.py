"""Workers: RunActivityWorkflow, TaskInstanceWorkflow, their activities, the task
handlers, and the ``ingest worker`` process that runs them."""
