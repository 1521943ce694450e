// Errors of the taskengine client. Every failed call rejects with a
// TaskengineError: an ApiError when the server answered (the API's stable code
// such as "not_found", "conflict" or "stale", the HTTP status and the error's
// details), a TransportError when no answer came (refused, reset, timed out).

export class TaskengineError extends Error {
  get retryable() {
    return false;
  }
}

// No HTTP answer: the server is down, restarting or unreachable.
export class TransportError extends TaskengineError {
  constructor(message, options) {
    super(message, options);
    this.name = 'TransportError';
    this.httpStatus = 0;
    this.code = 'unavailable';
  }

  get retryable() {
    return true;
  }
}

// The server answered with an error document.
export class ApiError extends TaskengineError {
  constructor(httpStatus, code, message, details = {}) {
    super(`${code} (HTTP ${httpStatus}): ${message}`);
    this.name = new.target.name;
    this.httpStatus = httpStatus;
    this.code = code;
    this.apiMessage = message;
    this.details = details;
  }

  get retryable() {
    return [429, 502, 503, 504].includes(this.httpStatus);
  }
}

export class BadRequest extends ApiError {}
export class Unauthenticated extends ApiError {}
export class Forbidden extends ApiError {}
// Missing, or another tenant's: the API does not tell them apart.
export class NotFound extends ApiError {}
export class Conflict extends ApiError {}

// 409 on dispatch: the idempotency key was used with a different payload.
// Nothing was created; existingExecutionId names the key's execution.
export class IdempotencyConflict extends Conflict {
  get existingExecutionId() {
    return String(this.details.existing_execution_id ?? '');
  }
}

// 409 stale: the claim version is no longer current (the lease was lost).
export class Stale extends ApiError {}

// 429: over a rate limit; retryAfter is the server's hint in seconds.
export class TooManyRequests extends ApiError {
  get retryAfter() {
    const v = Number(this.details.retry_after ?? 1);
    return Number.isFinite(v) ? v : 1;
  }
}

export class Unavailable extends ApiError {}

// Client.wait: the execution did not end in time; `execution` is its last state.
export class WaitTimeout extends TaskengineError {
  constructor(execution, timeoutMs) {
    super(`execution ${execution.id} is still ${execution.status} after ${timeoutMs} ms`);
    this.name = 'WaitTimeout';
    this.execution = execution;
  }
}

const BY_CODE = {
  invalid_argument: BadRequest,
  bad_request: BadRequest,
  unauthenticated: Unauthenticated,
  forbidden: Forbidden,
  not_found: NotFound,
  conflict: Conflict,
  stale: Stale,
  unavailable: Unavailable,
};

// The ApiError subclass for an answer's status and code.
export function apiError(httpStatus, code, message, details = {}) {
  let Cls = BY_CODE[code] ?? ApiError;
  if (httpStatus === 429) Cls = TooManyRequests;
  else if (code === 'conflict' && 'existing_execution_id' in details) Cls = IdempotencyConflict;
  return new Cls(httpStatus, code, message, details);
}
