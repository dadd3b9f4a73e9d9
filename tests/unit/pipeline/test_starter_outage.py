"""Which start failures the starter retries (``pipeline.starter.outage``): an outage is
retried with the offset held back; a refusal is dead-lettered."""

from __future__ import annotations

import pytest
from google.protobuf.any_pb2 import Any as AnyProto
from temporalio.api.common.v1 import GrpcStatus
from temporalio.service import RPCError, RPCStatusCode

from pipeline.starter import E_NAMESPACE_NOT_FOUND, START_ERROR_LABELS, outage

NS_DETAIL = "type.googleapis.com/temporal.api.errordetails.v1.NamespaceNotFoundFailure"
WF_DETAIL = "type.googleapis.com/temporal.api.errordetails.v1.NotFoundFailure"


def _error(status: RPCStatusCode, message: str, detail: str | None = None) -> RPCError:
    grpc = GrpcStatus(code=status.value, message=message)
    if detail is not None:
        grpc.details.append(AnyProto(type_url=detail))
    return RPCError(message, status, grpc.SerializeToString())


@pytest.mark.parametrize(
    ("error", "label"),
    [
        (_error(RPCStatusCode.UNAVAILABLE, "connection refused"), "UNAVAILABLE"),
        # The real server, while its PostgreSQL is down, about a namespace that exists.
        (
            _error(RPCStatusCode.NOT_FOUND, "Namespace default is not found.", NS_DETAIL),
            E_NAMESPACE_NOT_FOUND,
        ),
        (_error(RPCStatusCode.NOT_FOUND, "workflow not found", WF_DETAIL), None),
        (_error(RPCStatusCode.NOT_FOUND, "Namespace x is not found."), None),  # no detail
        (_error(RPCStatusCode.INVALID_ARGUMENT, "WorkflowId exceeds length limit"), None),
        # The credentials, not the message: an expired JWT, a revoked permission.
        (_error(RPCStatusCode.PERMISSION_DENIED, "Request unauthorized."), "PERMISSION_DENIED"),
        (_error(RPCStatusCode.UNAUTHENTICATED, "token expired"), "UNAUTHENTICATED"),
    ],
)
def test_outage_or_refusal(error: RPCError, label: str | None) -> None:
    assert outage(error) == label


def test_every_label_the_starter_counts_starts_at_zero() -> None:
    assert E_NAMESPACE_NOT_FOUND in START_ERROR_LABELS
    assert "UNAVAILABLE" in START_ERROR_LABELS


async def test_a_start_retrying_an_outage_makes_the_process_not_ready_until_it_succeeds() -> None:
    """While the starter waits out Temporal's outage, ``/readyz`` (which answers from
    ``RETRYING``) names it; once the start goes through, the process is ready again."""
    from pipeline.retry import RETRYING
    from pipeline.starter import STARTED, Starter
    from schemas.workflow_io import RunActivityInput

    seen: list[str | None] = []

    class Client:
        calls = 0

        async def start_workflow(self, *args: object, **kwargs: object) -> None:
            Client.calls += 1
            seen.append(RETRYING.why_not_ready())
            if Client.calls < 3:
                raise _error(RPCStatusCode.UNAVAILABLE, "connection refused")

    starter = Starter(Client(), "tq", backoff_initial=0.001, backoff_max=0.002)  # type: ignore[arg-type]
    run = RunActivityInput("a1", "activity-a1:e1", "r1", "event", "e1", {"type": "t"})
    assert await starter.start(run) == STARTED
    assert seen[0] is None  # the first attempt: nothing failing yet
    assert seen[1] is not None and seen[1].startswith("start of a run retrying for")
    assert "RPCError: connection refused" in (seen[2] or "")
    assert RETRYING.why_not_ready() is None
