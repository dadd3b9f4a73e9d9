"""SQL for ``activity_runs`` and ``task_instances``: every write safe to repeat.

Activities retry, and workflows replay after a worker restart, so each function
here gives the same outcome however many times it runs for the same id:

* ``insert_run``: ``INSERT ... ON CONFLICT (run_id) DO NOTHING``.
* ``insert_run_and_tasks``: ``insert_run`` and the activity's task list in one
  statement (one round trip for RunActivityWorkflow's first step).
* ``claim_task``: the first insert of a task id claims its idempotency key; a task
  whose key another id holds is stored as ``duplicate`` (key NULL, ``duplicate_of``
  the holder). A repeat returns what the row already says, so a retried claim by
  the holder is still a claim and a retried claim by a duplicate is still not.
* ``advance_task``: moves pending -> running -> succeeded|failed only forwards
  (and, for a task that pauses, running -> pending_fix -> running | skipped |
  failed: see ``ALLOWED_FROM``); repeating a transition (or a late, older one)
  leaves the row as it is.
* ``finish_with_outbox``: ``advance_task(.., "succeeded")`` and the task's outbox
  message (an ``emit``) in one transaction, the message inserted
  ``ON CONFLICT (id) DO NOTHING`` under the task id: the task is recorded
  succeeded exactly when its message is in the outbox, and a retried attempt
  writes nothing twice. ``ingest relay`` publishes the outbox (``relay/``).
* ``fail_unclaimed``: the ``failed`` row of a task whose claim PostgreSQL refused (no
  row was written): no key, no payload, the error; inserted once (``ON CONFLICT (id)``).

**Stored keys.** An idempotency key is stored as it is when it is at most
``KEY_MAX_BYTES`` (2 KiB) of UTF-8 and has no NUL; otherwise as ``sha256:<hex>``, the
SHA-256 of its UTF-8 bytes (:func:`stored_key`). A unique btree entry holds at most
2,704 bytes (a random key of about 2.7 KB failed the claim with 54000, for ever), and
text cannot hold a NUL (22021). The digest keeps the dedupe: the same key always gives
the same digest, and two keys share one only with SHA-256's odds. 2 KiB, not less,
so that every key stored before this rule (up to about 2.7 KB) is stored the same way
now unless it is over 2 KiB: a longer one stored raw earlier does not dedupe against
its digest. A key that renders as ``sha256:`` and 64 hex digits is indistinguishable
from a digest; templates do not make such keys by accident.

Error text (``last_error``) is stored with a NUL written as ``\u0000``: a handler's
message may quote the data that failed it, and must not make the failure unwritable.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import datetime

import asyncpg
import orjson
from temporalio.exceptions import ApplicationError

from pipeline import tracing
from schemas.status import TaskStatus
from schemas.workflow_io import RunActivityInput, TaskSpec


@dataclass(frozen=True)
class OutboxMessage:
    """A message for the outbox: what an ``emit`` task publishes (staged, ``ctx.stage``),
    or an approval notice."""

    id: str  # the dedupe id consumers see: the task id, or schemas.ids.approval_notice_id
    topic: str
    key: bytes | None
    headers: tuple[tuple[str, bytes], ...]  # values UTF-8 (stored as JSON text)
    body: bytes


@dataclass(frozen=True)
class TaskRow:
    status: str
    changed: bool  # this call wrote the state (count it); False on a repeat
    duplicate_of: str | None = None
    # This call also marked the task's run succeeded: it was the last of the run's
    # ``run_tasks`` tasks to succeed (``advance_task``).
    run_finished: bool = False


# Keys longer than this (UTF-8 bytes) are stored as their SHA-256 (see the module doc).
KEY_MAX_BYTES = 2048
DIGEST_PREFIX = "sha256:"


def stored_key(key: str | None) -> str | None:
    """The form of idempotency key ``key`` that ``task_instances`` stores."""
    if key is None:
        return None
    try:
        raw = key.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: text cannot hold it either
        raw = key.encode("utf-8", "surrogatepass")
    else:
        if len(raw) <= KEY_MAX_BYTES and "\x00" not in key:
            return key
    return DIGEST_PREFIX + hashlib.sha256(raw).hexdigest()


def error_text(error: str | None) -> str | None:
    """``error`` as ``last_error`` can store it: a NUL written as ``\\u0000``, a lone
    surrogate as its escape."""
    if error is None:
        return None
    text = error.encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("\x00", "\\u0000")


def _ts(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


# log_run's insert-or-nothing; $2 is the activity id.
_INSERT_RUN = (
    "INSERT INTO activity_runs (run_id, activity_id, workflow_id, trigger_kind, event_id,"
    " scheduled_for, context_window_start, context_window_end, trace_id)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (run_id) DO NOTHING"
)


def _run_args(run: RunActivityInput, trace_id: str | None) -> tuple[object, ...]:
    return (
        uuid.UUID(run.run_id),
        uuid.UUID(run.activity_id),
        run.workflow_id,
        run.trigger_kind,
        run.event_id,
        _ts(run.scheduled_for),
        _ts(run.context_window_start),
        _ts(run.context_window_end),
        trace_id,
    )


async def insert_run(
    pool: asyncpg.Pool, run: RunActivityInput, trace_id: str | None = None
) -> bool:
    """True if this call created the row, False if it was already there.

    ``trace_id``: the run's trace (32 hex digits; None when not traced), kept on the row."""
    inserted = await pool.fetchval(
        f"{_INSERT_RUN} RETURNING true",
        *_run_args(run, trace_id),
    )
    return bool(inserted)


# start_run's insert: as _INSERT_RUN, but a run of a paused activity (ingest activities
# pause, activities.paused_at) is recorded 'held' (workers/hold.py).
_INSERT_RUN_OR_HELD = (
    "INSERT INTO activity_runs (run_id, activity_id, workflow_id, trigger_kind, event_id,"
    " scheduled_for, context_window_start, context_window_end, trace_id, status)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, CASE WHEN EXISTS (SELECT 1 FROM activities"
    " WHERE id = $2 AND paused_at IS NOT NULL) THEN 'held' ELSE 'running' END)"
    " ON CONFLICT (run_id) DO NOTHING"
)


async def insert_run_and_tasks(
    pool: asyncpg.Pool, run: RunActivityInput, trace_id: str | None = None
) -> tuple[bool, list[object] | None, object | None, bool]:
    """``insert_run`` then ``activity_tasks``, as one statement: (inserted, tasks or None,
    the activity's ``flow`` block as JSON or None, held).

    ``held``: the row says the run is held (or was skipped while held): its activity was
    paused when the row was first written. Read from the row, not from the pause as it is
    now, so a repeated step answers what the first one recorded."""
    row = await pool.fetchrow(
        f"WITH ins AS ({_INSERT_RUN_OR_HELD} RETURNING status)"
        " SELECT EXISTS (SELECT 1 FROM ins) AS inserted, a.tasks, a.flow,"
        " COALESCE((SELECT status FROM ins),"
        " (SELECT status FROM activity_runs WHERE run_id = $1)) IN ('held', 'skipped') AS held"
        " FROM (SELECT 1) one LEFT JOIN activities a ON a.id = $2",
        *_run_args(run, trace_id),
    )
    flow = orjson.loads(row["flow"]) if row["flow"] is not None else None
    return bool(row["inserted"]), _task_list(row["tasks"]), flow, bool(row["held"])


def _task_list(raw: object) -> list[object] | None:
    if raw is None:
        return None
    value = orjson.loads(raw) if isinstance(raw, str | bytes) else raw
    return list(value)  # type: ignore[arg-type]


async def finish_run(pool: asyncpg.Pool, run_id: str, status: str) -> bool:
    """Set the final status; ``finished_at`` keeps its first value. False if no row.

    Also frees the run's singleton key, if it holds one (``flow_singleton``,
    router/flow/singleton.py)."""
    row = await pool.fetchval(
        "WITH done AS (UPDATE activity_runs SET status = $2,"
        " finished_at = COALESCE(finished_at, now()) WHERE run_id = $1 RETURNING workflow_id),"
        " freed AS (DELETE FROM flow_singleton WHERE workflow_id IN (SELECT workflow_id FROM done))"
        " SELECT true FROM done",
        uuid.UUID(run_id),
        status,
    )
    return bool(row)


async def run_end_reason(pool: asyncpg.Pool, run_id: str) -> str:
    """Why the run is being ended, for its cancelled tasks' rows: its ``ended_by`` once
    written, else the router's recorded cancel request (``cancel_on:<event_id>``), else
    a generic reason (a cancellation from the Temporal UI or CLI names none)."""
    reason = await pool.fetchval(
        "SELECT COALESCE(r.ended_by, c.ended_by) FROM activity_runs r"
        " LEFT JOIN flow_cancel_requests c ON c.workflow_id = r.workflow_id"
        " WHERE r.run_id = $1",
        uuid.UUID(run_id),
    )
    return str(reason) if reason else "cancellation requested"


async def end_run(
    pool: asyncpg.Pool, run: RunActivityInput, status: str, ended_by: str | None
) -> tuple[str, str | None, bool]:
    """A run that ends otherwise than by its tasks (cancelled, timed out): its row is
    written if the run never wrote it (cancelled before its first step), then set to
    ``status`` with ``ended_by`` (None: the router's recorded cancel request, if any),
    unless it had finished: a run whose last task marked it succeeded keeps that.
    Frees its singleton key as ``finish_run`` does. Returns (status, ended_by) now, and
    whether this call ended it (False: a repeat, or the run had finished).

    One transaction; a repeat changes nothing (``finished_at`` keeps its first value).
    """
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(_INSERT_RUN, *_run_args(run, None))
        row = await conn.fetchrow(
            "UPDATE activity_runs r SET status = $2, finished_at = COALESCE(finished_at, now()),"
            " ended_by = COALESCE(r.ended_by, $3, (SELECT c.ended_by FROM flow_cancel_requests c"
            "   WHERE c.workflow_id = r.workflow_id AND $2 = 'cancelled'))"
            " WHERE run_id = $1 AND status IN ('running', 'held')"
            " RETURNING status, ended_by",
            uuid.UUID(run.run_id),
            status,
            ended_by,
        )
        changed = row is not None
        if row is None:  # finished meanwhile (or a repeat): its outcome stands
            row = await conn.fetchrow(
                "SELECT status, ended_by FROM activity_runs WHERE run_id = $1",
                uuid.UUID(run.run_id),
            )
            assert row is not None
        await conn.execute("DELETE FROM flow_singleton WHERE workflow_id = $1", run.workflow_id)
        return str(row["status"]), row["ended_by"], changed


async def activity_tasks(pool: asyncpg.Pool, activity_id: str) -> list[object] | None:
    """The ``activities.tasks`` list, or None when there is no such activity."""
    raw = await pool.fetchval("SELECT tasks FROM activities WHERE id = $1", uuid.UUID(activity_id))
    return _task_list(raw)


async def _current(conn: asyncpg.Connection, task_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow(
        "SELECT status, duplicate_of FROM task_instances WHERE id = $1", task_id
    )


async def claim_task(
    pool: asyncpg.Pool, task_id: str, run_id: str, spec: TaskSpec, *, running: bool = False
) -> TaskRow:
    """Insert the task as ``pending`` holding its key, or as ``duplicate`` of the holder.

    ``running=True`` claims and marks it running (first attempt) in the same
    statement: what ``claim_task`` then ``advance_task(.., "running")`` do in two.
    A repeat that finds the row still ``pending`` advances it.
    """
    payload = _payload_json(spec.payload)
    key = stored_key(spec.idempotency_key)
    args = (task_id, uuid.UUID(run_id), spec.task_type, spec.index)
    status, attempts = (TaskStatus.RUNNING, 1) if running else (TaskStatus.PENDING, 0)
    async with pool.acquire() as conn:
        # No conflict target: a clash on the id or on the unique key both land here.
        inserted = await conn.fetchval(
            "INSERT INTO task_instances (id, run_id, task_type, index, idempotency_key, payload,"
            " status, attempts) VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8)"
            " ON CONFLICT DO NOTHING RETURNING true",
            *args,
            key,
            payload,
            status,
            attempts,
        )
        if inserted:
            return TaskRow(status, True)
        row = await _current(conn, task_id)
        if row is not None:  # a repeat: the row already decided
            if running and row["status"] == TaskStatus.PENDING:
                advanced = await _advance(conn, task_id, TaskStatus.RUNNING, None)
                assert advanced is not None  # the row was just read
                return advanced
            return TaskRow(row["status"], False, row["duplicate_of"])
        holder = await conn.fetchval(
            "SELECT id FROM task_instances WHERE idempotency_key = $1", key
        )
        if holder is None:  # the holder's key was released meanwhile: try again
            raise RuntimeError(f"idempotency key {key!r} changed hands; retry")
        inserted = await conn.fetchval(
            "INSERT INTO task_instances (id, run_id, task_type, index, payload, status,"
            " duplicate_of) VALUES ($1, $2, $3, $4, $5::jsonb, 'duplicate', $6)"
            " ON CONFLICT (id) DO NOTHING RETURNING true",
            *args,
            payload,
            holder,
        )
        row = await _current(conn, task_id)
        assert row is not None
        return TaskRow(row["status"], bool(inserted), row["duplicate_of"])


def _payload_json(payload: dict[str, object]) -> str:
    """The payload as JSON text for ``$n::jsonb``; a payload no JSON can carry (a lone
    surrogate) fails the claim for good, as PostgreSQL's own refusals do."""
    try:
        return orjson.dumps(payload).decode()
    except orjson.JSONEncodeError as exc:
        raise ApplicationError(
            f"the task payload cannot be encoded as JSON: {exc}",
            type="UnencodablePayload",
            non_retryable=True,
        ) from None


async def fail_unclaimed(
    pool: asyncpg.Pool, task_id: str, run_id: str, spec: TaskSpec, error: str | None
) -> TaskRow:
    """Record as ``failed`` a task that has no row: its claim was refused for good (a
    data error), so it holds no key and its payload is not stored. A repeat, or a row
    written meanwhile, leaves the row as it is and returns it."""
    async with pool.acquire() as conn:
        inserted = await conn.fetchval(
            "INSERT INTO task_instances (id, run_id, task_type, index, status, last_error)"
            " VALUES ($1, $2, $3, $4, 'failed', $5) ON CONFLICT (id) DO NOTHING RETURNING true",
            task_id,
            uuid.UUID(run_id),
            spec.task_type,
            spec.index,
            error_text(error),
        )
        row = await _current(conn, task_id)
        assert row is not None
        return TaskRow(row["status"], bool(inserted), row["duplicate_of"])


# The states each status may be entered from. pending_fix -> running is a retry
# after an operator's fix; it is the only way back, so a repeated (retried) write
# of a transition already made changes nothing.
_S = TaskStatus
ALLOWED_FROM: dict[str, list[str]] = {
    _S.RUNNING: [_S.PENDING, _S.PENDING_FIX],
    _S.PENDING_FIX: [_S.RUNNING],
    _S.SUCCEEDED: [_S.PENDING, _S.RUNNING],
    _S.FAILED: [_S.PENDING, _S.RUNNING, _S.PENDING_FIX],
    _S.SKIPPED: [_S.PENDING_FIX],
    _S.CANCELLED: [_S.PENDING, _S.RUNNING, _S.PENDING_FIX],
}


async def advance_task(
    pool: asyncpg.Pool,
    task_id: str,
    status: str,
    error: str | None = None,
    run_tasks: int | None = None,
) -> TaskRow | None:
    """Move a task along ``ALLOWED_FROM``; None if no such row.

    ``run_tasks``: the size of the task's run's plan. See ``_advance``."""
    async with pool.acquire() as conn:
        return await _advance(conn, task_id, status, error, run_tasks)


# One statement: the update, else the row as it is (the outer SELECT reads the
# snapshot before the update, used only when nothing was updated).
_ADVANCE = (
    "WITH upd AS (UPDATE task_instances SET status = $2,"
    " attempts = CASE WHEN $2 = 'running' THEN attempts + 1 ELSE attempts END,"
    " last_error = CASE WHEN $2 = 'running' THEN last_error ELSE $3 END,"
    " updated_at = now()"
    " WHERE id = $1 AND status = ANY($4::text[]) RETURNING run_id, status, duplicate_of)"
)
_UNCHANGED = (
    " UNION ALL SELECT status, duplicate_of, false, false FROM task_instances"
    " WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM upd)"
)
# The succeeded transition also counts the task on its run; the count reaching $5 (the
# plan's size) marks an unfinished run succeeded and frees its singleton key, as
# ``finish_run`` would. The run's row lock orders concurrent last tasks: the second
# updater re-reads the row the first committed, so exactly one of them sees the last
# count. A task succeeds once (ALLOWED_FROM), so the count is never made twice.
_SUCCEED = (
    f"{_ADVANCE}, run AS (UPDATE activity_runs r"
    " SET tasks_succeeded = r.tasks_succeeded + 1,"
    " status = CASE WHEN r.tasks_succeeded + 1 = $5 AND r.finished_at IS NULL"
    " THEN 'succeeded' ELSE r.status END,"
    " finished_at = CASE WHEN r.tasks_succeeded + 1 = $5 AND r.finished_at IS NULL"
    " THEN now() ELSE r.finished_at END"
    " FROM upd WHERE r.run_id = upd.run_id"
    " RETURNING r.workflow_id, r.tasks_succeeded = $5 AND r.status = 'succeeded' AS finished),"
    " freed AS (DELETE FROM flow_singleton WHERE workflow_id IN"
    " (SELECT workflow_id FROM run WHERE finished))"
    " SELECT status, duplicate_of, true AS changed,"
    " COALESCE((SELECT finished FROM run), false) AS run_finished FROM upd"
    f"{_UNCHANGED}"
)
_OTHER = (
    f"{_ADVANCE} SELECT status, duplicate_of, true AS changed, false AS run_finished FROM upd"
    f"{_UNCHANGED}"
)


async def _advance(
    conn: asyncpg.Connection,
    task_id: str,
    status: str,
    error: str | None,
    run_tasks: int | None = None,
) -> TaskRow | None:
    """``advance_task`` on a connection. A transition to ``succeeded`` counts the task
    on its run (``activity_runs.tasks_succeeded``, in the same statement); when that
    count reaches ``run_tasks`` the run is marked succeeded too (``run_finished``), so
    RunActivityWorkflow needs no finish step (None: only counted)."""
    if status == TaskStatus.SUCCEEDED:
        row = await conn.fetchrow(
            _SUCCEED, task_id, status, error_text(error), ALLOWED_FROM[status], run_tasks
        )
    else:
        row = await conn.fetchrow(_OTHER, task_id, status, error_text(error), ALLOWED_FROM[status])
    if row is None:
        return None
    return TaskRow(row["status"], row["changed"], row["duplicate_of"], row["run_finished"])


async def record_attempt(
    pool: asyncpg.Pool, task_id: str, attempt: int, error: str | None = None
) -> None:
    """Note a handler attempt (and its error) while the task is running."""
    await pool.execute(
        "UPDATE task_instances SET attempts = GREATEST(attempts, $2),"
        " last_error = COALESCE($3, last_error), updated_at = now() WHERE id = $1",
        task_id,
        attempt,
        error_text(error),
    )


async def finish_with_outbox(
    pool: asyncpg.Pool, task_id: str, message: OutboxMessage, run_tasks: int | None = None
) -> TaskRow | None:
    """Mark the task succeeded and put its message in the outbox, atomically.

    The message is inserted only when the task is (now or already) succeeded; a task
    an operator failed meanwhile keeps its state and emits nothing. None if no row.
    """
    async with pool.acquire() as conn, conn.transaction():
        row = await _advance(conn, task_id, TaskStatus.SUCCEEDED, None, run_tasks)
        if row is not None and row.status == TaskStatus.SUCCEEDED:
            await put_outbox(conn, message)
        return row


async def put_outbox(conn: asyncpg.Pool | asyncpg.Connection, message: OutboxMessage) -> bool:
    """Write ``message`` to the outbox once (by its id); True if this call wrote it.

    With tracing on, the row keeps the current span's traceparent (the step that wrote
    it): the relay's record joins that trace (``relay/service.py``)."""
    headers = orjson.dumps([[k, v.decode()] for k, v in message.headers]).decode()
    status = await conn.execute(
        "INSERT INTO outbox (id, topic, key, headers, body, traceparent)"
        " VALUES ($1, $2, $3, $4::jsonb, $5, $6) ON CONFLICT (id) DO NOTHING",
        message.id,
        message.topic,
        message.key,
        headers,
        message.body,
        tracing.current_traceparent(),
    )
    return bool(status == "INSERT 0 1")
