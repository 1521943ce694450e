// taskengine: the client and worker SDK of a taskengine server, over its HTTP API.
export {Client, TERMINAL_STATUSES, DEFAULT_SERVER} from './src/client.js';
export {Worker} from './src/worker.js';
export {JobContext, HandlerStop, Canceled, LeaseLost, EffectAmbiguous, RetryableError,
        PermanentError, NotPerformed} from './src/context.js';
export {TaskengineError, TransportError, ApiError, BadRequest, Unauthenticated, Forbidden,
        NotFound, Conflict, IdempotencyConflict, Stale, TooManyRequests, Unavailable,
        WaitTimeout} from './src/errors.js';
export {VERSION} from './src/version.js';
