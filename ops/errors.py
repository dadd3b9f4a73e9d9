"""The API's errors: 400 names the bad field, 404 the unknown id, 409 the state,
503 Temporal (or the worker a query or update waits for) did not answer in time.
Each answers an ``ops.models.ErrorBody``."""

from __future__ import annotations

from temporalio.client import WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.service import RPCError, RPCStatusCode

from schemas.errors import IngestError

# The RPC ran out of time (rpc_timeout: CANCELLED) or Temporal is unreachable.
_NO_ANSWER = (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.UNAVAILABLE)


class ApiError(IngestError):
    status = 500

    def __init__(self, detail: str, field: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.field = field

    def body(self) -> dict[str, str]:
        out = {"detail": self.detail}
        if self.field is not None:
            out["field"] = self.field
        return out


class BadField(ApiError):
    status = 400

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}", field)


class NotFound(ApiError):
    status = 404


class Conflict(ApiError):
    status = 409


class Forbidden(ApiError):
    status = 403


class Unavailable(ApiError):
    status = 503


def no_answer(exc: BaseException) -> bool:
    """Temporal, or the worker a query or update waits for, did not answer in time."""
    if isinstance(exc, WorkflowUpdateRPCTimeoutOrCancelledError):
        return True
    return isinstance(exc, RPCError) and exc.status in _NO_ANSWER
