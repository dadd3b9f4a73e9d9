"""The contract: what crosses process, wire and database boundaries. Imports only itself.

* :mod:`schemas.ids`: every workflow, run, schedule and permit id (the only place).
* :mod:`schemas.envelope`: the event envelope and its parser.
* :mod:`schemas.workflow_io`, :mod:`schemas.approval_io`: workflow and activity inputs
  and outputs (frozen dataclasses).
* :mod:`schemas.definitions`: activity definitions (``activities`` rows, apply files).
* :mod:`schemas.status`: run and task statuses (matching the database's CHECKs).
* :mod:`schemas.search_attributes`: the custom Temporal search attributes.
* :mod:`schemas.errors`: ``IngestError``, the root of every project exception.
* ``migrations/``: the SQL migrations (``ingest migrate``).
"""
