"""An activity's ``flow`` block: the contract of flow control.

* :mod:`schemas.flow.spec`: the models of every control and the key reader.
* :mod:`schemas.flow.controls`: every control with its stage, the one list a new
  control is added to (docs/architecture.md, "Adding a flow control").
* :mod:`schemas.flow.concurrency`: which slot a run holds (``concurrency``, ``priority``).
* :mod:`schemas.flow.fairness`: the fairness key and weight a run's start carries.
* :mod:`schemas.flow.io`: the inputs and outputs of the flow workflows and activities.
"""
