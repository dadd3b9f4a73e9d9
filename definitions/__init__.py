"""Activity definitions: reading them from files, storing them, listing them.

* :mod:`definitions.files`: a JSON/YAML activities file -> validated definitions,
  naming every bad field;
* :mod:`definitions.store`: the ``activities`` table (the one upsert);
* :mod:`definitions.cli`: ``ingest activities apply|list``.

The models themselves are in :mod:`schemas.definitions`.
"""
