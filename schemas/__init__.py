"""The contract: what crosses process, wire and database boundaries. Imports only itself.

* :mod:`schemas.ids`: every workflow, run, schedule and permit id (the only place).
* :mod:`schemas.envelope`: the event envelope and its parser.
* Inputs and outputs (frozen dataclasses): :mod:`schemas.workflow_io` (runs, tasks,
  permits), :mod:`schemas.approval_io`, :mod:`schemas.schedule_io`, and
  :mod:`schemas.flow` (the flow block, its controls and their I/O).
* :mod:`schemas.converter`: the data converter every Temporal client uses.
* :mod:`schemas.definitions`: activity definitions (``activities`` rows, apply files).
* :mod:`schemas.status`: run and task statuses (matching the database's CHECKs).
* :mod:`schemas.search_attributes`: the custom Temporal search attributes.
* :mod:`schemas.errors`: ``IngestError``, the root of every project exception.
* ``migrations/``: the SQL migrations (``ingest migrate``).
"""
