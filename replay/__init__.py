"""``ingest replay``: re-route a topic range, or re-drive the DLQ, through the router's code path.

* :mod:`replay.session`: the skeleton both share (consumer, producer, activity
  catalog and the live router's :class:`router.routing.Routing`) and the report.
* :mod:`replay.topic`: :class:`Replayer`, a range of a topic, no consumer group.
* :mod:`replay.dlq`: :class:`DlqRedriver`, the DLQ once, group ``ingest-dlq-replay``.
* :mod:`replay.request`: one replay as asked for (:class:`ReplayRequest`) and
  :func:`run_request`, shared by the subcommand and the ops API.
* :mod:`app.commands.replay`: the subcommand (flags, progress bar, summary).
"""
