"""Reading an activities file (JSON or YAML) and naming every bad field.

Errors are rendered as ``activities[1].trigger.misfire_policy: message``: list
indexes in brackets, and pydantic's discriminator tag (``cron``/``event``,
which it inserts after ``trigger``) left out because it is not in the file.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from schemas.definitions import ActivityDef, ActivityFile
from schemas.errors import IngestError
from schemas.flow.spec import BLOB_LIMIT, TASK_OVERHEAD_BYTES, json_bytes, run_bytes

_TAGS = {"cron", "event"}


class FileError(IngestError):
    """The file is unreadable or invalid; ``problems`` holds one line per bad field."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def field_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for i, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
        elif i > 0 and loc[i - 1] == "trigger" and part in _TAGS:
            continue
        else:
            out += f".{part}" if out else str(part)
    return out or "(file)"


def parse(text: str, suffix: str) -> ActivityFile:
    try:
        data: Any = json.loads(text) if suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        kind = "JSON" if suffix == ".json" else "YAML"
        raise FileError([f"(file): not valid {kind}: {exc}"]) from None
    try:
        parsed = ActivityFile.model_validate(data)
    except ValidationError as exc:
        raise FileError([f"{field_path(e['loc'])}: {e['msg']}" for e in exc.errors()]) from None
    seen: dict[str, int] = {}
    dupes = []
    for i, act in enumerate(parsed.activities):
        if str(act.id) in seen:
            dupes.append(f"activities[{i}].id: duplicate of activities[{seen[str(act.id)]}].id")
        seen.setdefault(str(act.id), i)
    if dupes:
        raise FileError(dupes)
    return parsed


def load(path: Path) -> ActivityFile:
    try:
        text = path.read_text()
    except OSError as exc:
        raise FileError([f"(file): {exc}"]) from None
    return parse(text, path.suffix.lower())


def check_task_types(parsed: ActivityFile, known: Collection[str]) -> None:
    """Raise :class:`FileError` naming each task whose type no handler serves.

    ``known``: the task types the workers run; the caller (the command) knows them,
    so this module stays free of the worker's handler registry.
    """
    names = ", ".join(sorted(known))
    problems = [
        f"activities[{i}].tasks[{j}].type: no handler serves task type {task.type!r}"
        f" (known: {names})"
        for i, act in enumerate(parsed.activities)
        for j, task in enumerate(act.tasks)
        if task.type not in known
    ]
    if problems:
        raise FileError(problems)


def run_size_problem(act: ActivityDef, max_event_bytes: int) -> str | None:
    """Why a run of ``act`` cannot carry an event of ``max_event_bytes``, or None.

    A run's plan (one Temporal payload, at most ``schemas.flow.spec.BLOB_LIMIT``) holds the
    event once per task, with the task's own payload and config; a plan over the limit
    is never refused once, the run stays ``running`` for ever. Counted as ASCII JSON:
    an event whose text is mostly non-ASCII is up to 3 times larger in Temporal's JSON
    (``schemas.flow.spec.json_bytes``), which no check on INGEST_MAX_EVENT_BYTES can bound.
    A cron activity carries no event.
    """
    if act.trigger.type != "event" or not act.tasks:
        return None
    tasks = sum(t.count for t in act.tasks)
    own = sum(t.count * json_bytes({"payload": t.payload, "config": t.config}) for t in act.tasks)
    total = run_bytes(tasks, max_event_bytes, own)
    if total <= BLOB_LIMIT:
        return None
    fits = BLOB_LIMIT // (max_event_bytes + TASK_OVERHEAD_BYTES)
    most = max((BLOB_LIMIT - own) // tasks - TASK_OVERHEAD_BYTES, 0)
    return (
        f"{tasks} tasks each carry the event: {tasks} x {max_event_bytes} bytes"
        f" (INGEST_MAX_EVENT_BYTES) make a {total}-byte plan, over Temporal's"
        f" {BLOB_LIMIT}-byte payload limit; use at most {fits} tasks, or"
        f" INGEST_MAX_EVENT_BYTES <= {most}"
    )


def check_run_sizes(parsed: ActivityFile, max_event_bytes: int) -> None:
    """Raise :class:`FileError` naming each event activity whose run cannot carry an
    event of ``max_event_bytes`` (:func:`run_size_problem`), one line each."""
    problems = [
        f"activities[{i}].tasks: {problem}"
        for i, act in enumerate(parsed.activities)
        if (problem := run_size_problem(act, max_event_bytes)) is not None
    ]
    if problems:
        raise FileError(problems)
