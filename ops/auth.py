"""What the routes know of authentication: who sends the request, and the name to record.

:class:`ops.guard.Guard` authenticated the request before the body was read and put
its :class:`ops.identity.Identity` in the ASGI scope; :func:`identity` is the route
dependency that reads it, :func:`acting` the one rule for ``actor`` and ``by`` fields.
"""

from __future__ import annotations

from fastapi import Request

from ops.errors import ApiError, Forbidden
from ops.guard import IDENTITY
from ops.identity import Identity


def identity(request: Request) -> Identity:
    """The route dependency: who sends this request (set by :class:`Guard`)."""
    who = request.scope.get(IDENTITY)
    if not isinstance(who, Identity):  # a route outside the guard: a bug, not a client error
        raise ApiError("no identity for this request: it did not pass ops.guard")
    return who


def acting(who: Identity, given: str | None, field: str) -> str:
    """The name to record for ``who``. A request may repeat its own name in ``field``
    (``actor``, ``by``), never another: that answers 403, so no client believes it acted
    as someone its credentials do not name."""
    if given is not None and given != who.name:
        raise Forbidden(
            f"{field} comes from your credentials ({who.name!r}), not the request: "
            f"leave it out (got {given!r})",
            field,
        )
    return who.name
