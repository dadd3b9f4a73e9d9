"""Activity definitions: reading them from files, storing them, listing them.

* :mod:`definitions.files`: a JSON/YAML activities file -> validated definitions,
  naming every bad field;
* :mod:`definitions.store`: the ``activities`` table (the one upsert);
* :mod:`definitions.pause`: an activity's pause (``paused_at``), and what a resume does
  with the runs held meanwhile (the worker holds them: ``workers/hold.py``).

``ingest activities apply|list|pause|resume`` is :mod:`app.commands.activities` (it also reconciles
schedules and permit resources, so it sits above scheduler and workers).

The models themselves are in :mod:`schemas.definitions`.
"""
