"""The composition root: the ``ingest`` command line and the worker's parts, above every package.

* :mod:`app.cli`: ``ingest``, every subcommand in --help order.
* :mod:`app.parts`: which parts ``ingest worker`` serves (core, cron, permits, approvals).
* :mod:`app.worker_cmd`: ``ingest worker`` (``python -m app.worker_cmd``).
* :mod:`app.activities_cmd`: ``ingest activities apply|list`` (definitions, schedules, permits).
* :mod:`app.run_cmd`: ``ingest run``, every process in the foreground; its demo
  activities file ships as package data (``demo-activities.json``).
* :mod:`app.stack_cmd`: ``ingest stack``, creating the application's topics too.

The commands that need only their own package and the library (``ingest ingress``,
``router``, ``replay``, ``schedules``, ``ops``, ``permits``, ``migrate``,
``temporal``) stay in their packages; ``tests/unit/test_import_graph.py`` keeps
every edge pointing down the layers (docs/architecture.md).
"""
