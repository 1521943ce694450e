"""Errors of the taskengine client.

Every failed call raises a subclass of TaskengineError. An answer from the
server becomes an ApiError carrying the API's stable code ("not_found",
"conflict", "stale", ...), the HTTP status and the error's details; no answer
at all (refused, reset, timed out) is a TransportError.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional


class TaskengineError(Exception):
    """Base of every error this package raises."""

    retryable = False


class TransportError(TaskengineError):
    """No HTTP answer came: the server is down, restarting or unreachable."""

    retryable = True
    http_status = 0
    code = "unavailable"


class ApiError(TaskengineError):
    """The server answered with an error document."""

    def __init__(self, http_status: int, code: str, message: str,
                 details: Optional[Mapping[str, Any]] = None):
        super().__init__(f"{code} (HTTP {http_status}): {message}")
        self.http_status = http_status
        self.code = code
        self.message = message
        self.details = dict(details or {})

    @property
    def retryable(self) -> bool:  # type: ignore[override]
        return self.http_status in (429, 502, 503, 504)


class BadRequest(ApiError):
    """400: the request was malformed or refused by validation."""


class Unauthenticated(ApiError):
    """401: no token, an unknown or revoked one."""


class Forbidden(ApiError):
    """403: the token lacks the scope or the tenant."""


class NotFound(ApiError):
    """404: missing, or another tenant's (the API does not tell them apart)."""


class Conflict(ApiError):
    """409 conflict: the request does not fit the current state."""


class IdempotencyConflict(Conflict):
    """409 on dispatch: the key was used with a different payload.

    Nothing was created; existing_execution_id names the execution the key
    belongs to.
    """

    @property
    def existing_execution_id(self) -> str:
        return str(self.details.get("existing_execution_id", ""))


class Stale(ApiError):
    """409 stale: the claim version is no longer current (the lease was lost)."""


class TooManyRequests(ApiError):
    """429: over a rate limit; retry_after is the server's hint in seconds."""

    @property
    def retry_after(self) -> float:
        try:
            return float(self.details.get("retry_after", 1))
        except (TypeError, ValueError):
            return 1.0


class Unavailable(ApiError):
    """503: the server or its database cannot serve now."""


class WaitTimeout(TaskengineError, TimeoutError):
    """Client.wait: the execution did not end in time. `execution` is its last state."""

    def __init__(self, execution: Mapping[str, Any], timeout: float):
        super().__init__(
            f"execution {execution.get('id')} is still {execution.get('status')} "
            f"after {timeout:g} s")
        self.execution = dict(execution)


_BY_CODE = {
    "invalid_argument": BadRequest,
    "bad_request": BadRequest,
    "unauthenticated": Unauthenticated,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "conflict": Conflict,
    "stale": Stale,
    "unavailable": Unavailable,
}


def api_error(http_status: int, code: str, message: str,
              details: Optional[Mapping[str, Any]] = None) -> ApiError:
    """The ApiError subclass for an answer's status and code."""
    details = details or {}
    if http_status == 429:
        cls = TooManyRequests
    elif code == "conflict" and "existing_execution_id" in details:
        cls = IdempotencyConflict
    else:
        cls = _BY_CODE.get(code, ApiError)
    return cls(http_status, code, message, details)
