"""Flow control in the worker (docs/flow-control.md): what a run holds, and windows.

* Concurrency slots (stage ``hold``): :mod:`workers.flow.slot` (workflow code around
  the run's tasks), :mod:`workers.flow.slot_activities` and
  :mod:`workers.flow.slot_store` (the slot rows in PostgreSQL).
* Order (stage ``order``): :mod:`workers.flow.order` (a run waits for its turn in its
  key's line), :mod:`workers.flow.order_activities` (the turn round) and
  :mod:`workers.flow.order_store` (the places in PostgreSQL).
* Debounce and batch windows: :mod:`workers.flow.window` (``FlowWindowWorkflow``),
  :mod:`workers.flow.window_activities` (``close_window``: start the window's run),
  :mod:`workers.flow.window_dead_letters` (a window no run can take, to the DLQ).
* :mod:`workers.flow.part`: all of it as one worker part, with the gauges;
  :mod:`workers.flow.metrics`: the worker's flow metrics;
  :mod:`workers.flow.ended_metrics`: the runs-ended counters started at zero.
"""
