"""Activity definitions: reading them from files, storing them, listing them.

* :mod:`definitions.files`: a JSON/YAML activities file -> validated definitions,
  naming every bad field;
* :mod:`definitions.store`: the ``activities`` table (the one upsert).

``ingest activities apply|list`` is :mod:`app.commands.activities` (it also reconciles
schedules and permit resources, so it sits above scheduler and workers).

The models themselves are in :mod:`schemas.definitions`.
"""
