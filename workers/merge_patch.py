"""JSON merge patch (RFC 7396) and the checks a fix's patch must pass.

Pure and deterministic: the workflow's update validator runs :func:`check_patch`
and the workflow applies :func:`merge_patch` to the paused task's payload.
"""

from __future__ import annotations

from typing import Any

from schemas.errors import IngestError

# Keys plan_tasks puts in every payload (workers.planning): the trigger context is
# a fact about the run, not data an operator corrects.
RESERVED_KEYS = ("trigger", "event")


class PatchError(IngestError, ValueError):
    """The patch cannot be applied; the message names the offending field."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396: objects merge key by key, ``null`` deletes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def check_patch(patch: Any, payload: dict[str, Any]) -> dict[str, Any]:
    """The patched payload, or :class:`PatchError` naming what is wrong with ``patch``."""
    if not isinstance(patch, dict):
        raise PatchError(f"patch must be a JSON object (a merge patch), got {type(patch).__name__}")
    if not patch:
        raise PatchError("patch is empty: it changes nothing")
    for key in patch:
        if not isinstance(key, str):
            raise PatchError(f"patch keys must be strings, got {key!r}")
        if key in RESERVED_KEYS:
            raise PatchError(f"patch.{key}: the trigger context cannot be patched")
    patched = merge_patch(payload, patch)
    if patched == payload:
        raise PatchError("patch changes nothing in the payload")
    return patched  # type: ignore[no-any-return]
