"""taskengine: the client and worker SDK of a taskengine server, over its HTTP API."""

__version__ = "0.1.0"

from .client import BulkResult, Client, Dispatched, Lease, Page, TERMINAL_STATUSES  # noqa: E402
from .context import (Canceled, EffectAmbiguous, HandlerStop, JobContext,  # noqa: E402
                      LeaseLost, NotPerformed, PermanentError, RetryableError)
from .errors import (ApiError, BadRequest, Conflict, Forbidden,  # noqa: E402
                     IdempotencyConflict, NotFound, Stale, TaskengineError, TooManyRequests,
                     TransportError, Unauthenticated, Unavailable, WaitTimeout)
from .worker import Worker, WorkerStats  # noqa: E402

__all__ = [
    "ApiError", "BadRequest", "BulkResult", "Canceled", "Client", "Conflict", "Dispatched",
    "EffectAmbiguous", "Forbidden", "HandlerStop", "IdempotencyConflict", "JobContext", "Lease",
    "LeaseLost", "NotFound", "NotPerformed", "Page", "PermanentError", "RetryableError", "Stale",
    "TERMINAL_STATUSES", "TaskengineError", "TooManyRequests", "TransportError",
    "Unauthenticated", "Unavailable", "WaitTimeout", "Worker", "WorkerStats",
]
