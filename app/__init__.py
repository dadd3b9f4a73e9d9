"""The composition root: the ``ingest`` command line and the worker's parts, above every package.

* :mod:`app.cli`: ``ingest``, every subcommand in --help order (the list ``COMMANDS``).
* :mod:`app.commands`: one module per subcommand, named for it (``ingest router`` is
  :mod:`app.commands.router`), each declaring ``COMMAND``; ``python -m app.commands
  NAME`` runs one subcommand without importing the others.
* The framework they share: :mod:`app.command` (``Command``: name, --help, flags,
  run), :mod:`app.flags` (flags that override settings), :mod:`app.client_flags`
  (connection flags, a pool for a one-shot command), :mod:`app.dispatch` (exit codes,
  ending the process), :mod:`app.process_setup` (what a long-running command sets up
  before it runs: logs, tracing, the allocator trim).
* :mod:`app.parts`: which parts ``ingest worker`` serves (core, cron, permits,
  approvals, flow).

``tests/unit/test_import_graph.py`` keeps every edge pointing down the layers
(docs/architecture.md): nothing below ``app`` imports it.
"""
