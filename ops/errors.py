"""The API's errors: 400 names the bad field, 404 the unknown id, 409 the state."""

from __future__ import annotations

from schemas.errors import IngestError


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
