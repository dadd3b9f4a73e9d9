"""Flow control in the router (issue 23, docs/flow-control.md).

The planner reads each activity's flow keys from the event (:mod:`router.flow.keys`).
Events of a ``debounce`` or ``batch`` activity go into windows
(:mod:`router.flow.windows`), decided once in PostgreSQL, whose runs the window
workflow starts. Before any other run is started, :class:`router.flow.gate.FlowGate`
decides: start now, start after a delay (``throttle``), or skip with a reason
(``rate_limit``, ``singleton``). Decisions are recorded per workflow id in
PostgreSQL, so a redelivered or replayed trigger gets the decision it got the first time.
"""
