"""Cron triggers on Temporal Schedules.

One Temporal Schedule per cron activity (``activity-schedule-{activity_id}``).
Its action is not the run itself but :class:`scheduler.dispatcher.CronFireWorkflow`,
a tiny dispatcher: Temporal names schedule-started workflows ``{id}-{RFC3339}``
and starts backfills with ALLOW_DUPLICATE, so only a dispatcher that starts
``RunActivityWorkflow`` with the contract id (``schemas.ids.cron_workflow_id``)
and REJECT_DUPLICATE guarantees that no nominal time runs twice.

Modules: ``timing`` (nominal times, pure), ``spec`` (activity -> Schedule),
``misfire`` (the policy decision, pure), ``store`` (last cron run, logged runs),
``sync`` (reconcile schedules), ``dispatcher`` (the workflow and its activity),
``metrics`` (misfires), ``part`` (the dispatcher as a worker part). ``ingest
schedules`` is :mod:`app.commands.schedules`; activity definitions (files, the
``activities`` table, ``ingest activities``) are in :mod:`definitions`.
"""
