"""Bearer-token authentication for every API endpoint.

The token is compared in constant time (``hmac.compare_digest``) and never
logged or echoed: a missing header answers 401, a wrong token 403, and neither
response contains what was sent.
"""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request
from pydantic import SecretStr


class TokenGuard:
    """A FastAPI dependency; ``token=None`` (``--insecure-local`` only) lets everyone in."""

    def __init__(self, token: SecretStr | None) -> None:
        self._token = token.get_secret_value().encode() if token is not None else None

    def __call__(self, request: Request) -> None:
        if self._token is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            raise HTTPException(
                401,
                "missing bearer token: send Authorization: Bearer <INGEST_OPS_TOKEN>",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if not hmac.compare_digest(given.strip().encode(), self._token):
            raise HTTPException(403, "invalid token")
