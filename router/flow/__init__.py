"""The router's flow gate (issue 23, docs/flow-control.md).

The planner reads each activity's flow keys from the event (:mod:`router.flow.keys`);
before a run is started, :class:`router.flow.gate.FlowGate` decides: start now, start
after a delay (``throttle``), or skip with a reason (``rate_limit``, ``singleton``).
Decisions are recorded per workflow id in PostgreSQL, so a redelivered or replayed
trigger gets the decision it got the first time.
"""
