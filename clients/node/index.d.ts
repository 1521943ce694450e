// TypeScript types of the taskengine Node client and worker SDK (index.js).

export const VERSION: string;
export const DEFAULT_SERVER: string;
/** Statuses an execution stays in until an operator acts (replay). */
export const TERMINAL_STATUSES: readonly ExecutionStatus[];

export type ExecutionStatus =
  | 'queued' | 'running' | 'succeeded' | 'failed' | 'quarantined' | 'canceled'
  | 'partially_canceled';
export type Json = null | boolean | number | string | Json[] | {[key: string]: Json};
export type Payload = {[key: string]: Json};

export interface ClientOptions {
  /** Base URL. Default: TASKENGINE_SERVER, else http://127.0.0.1:8080. */
  server?: string;
  /** Bearer token. Default: TASKENGINE_TOKEN (none when unset). */
  token?: string;
  /** Per call; long polls add their wait. Default 30000. */
  timeoutMs?: number;
  /** Extra tries of idempotent calls. Default 2. */
  retries?: number;
}

export interface DispatchOptions {
  tenant?: string;
  /** Sent as Idempotency-Key: a repeat answers the first execution. */
  idempotencyKey?: string;
  /** Earliest start (not with delayMs). */
  runAt?: Date | string;
  delayMs?: number;
  lane?: string;
  parent?: string | number;
}

export interface Dispatched {
  id: string;
  status: ExecutionStatus;
  /** false: a repeat of an earlier idempotency key (HTTP 200). */
  created: boolean;
  statusUrl: string;
}

export interface BulkItem extends DispatchOptions {
  job: string;
  payload?: Payload;
}

export interface BulkResult {
  index: number;
  id: string;
  status: ExecutionStatus;
  created: boolean;
  /** The key was used with another payload: id names the existing execution. */
  conflict: boolean;
  statusUrl: string;
  error: {code: string; message: string} | null;
}

/** An execution as the API renders it (docs/openapi.json, Execution / ExecutionDetail). */
export interface Execution {
  id: number | string;
  job: string;
  tenant: string | null;
  queue: string;
  status: ExecutionStatus;
  attempt: number;
  cancel_requested: boolean;
  failure_class: 'retryable' | 'permanent' | 'ambiguous' | 'lease_expired' | null;
  error: string | null;
  run_at: string | null;
  lane_key: string | null;
  payload?: Payload;
  effects?: Array<{name: string; key: string; state: 'reserved' | 'committed'; detail: string | null}>;
  logs?: Array<{message: string; level: string; attempt: number}>;
  [field: string]: unknown;
}

export interface ListFilters {
  job?: string;
  tenant?: string;
  status?: ExecutionStatus | ExecutionStatus[];
  trigger?: string | string[];
  limit?: number;
  cursor?: string;
  offset?: number;
  queuedFrom?: string;
  queuedTo?: string;
  endedFrom?: string;
  endedTo?: string;
}

export interface Page {
  items: Execution[];
  /** null at the end. */
  nextCursor: string | null;
  total?: number;
}

export interface Lease {
  id: string;
  claimVersion: number;
  job: string;
  tenant: string | null;
  queue: string;
  attempt: number;
  payload: Payload;
  leaseMs: number;
  effectKeyPrefix: string;
  idempotencyKey: string | null;
  raw: {[key: string]: Json};
}

export class Client {
  constructor(options?: ClientOptions);
  readonly server: string;
  readonly timeoutMs: number;
  /** Closes kept-alive connections. */
  close(): void;
  /** Rejects with IdempotencyConflict when the key was used with another payload. */
  dispatch(job: string, payload?: Payload, options?: DispatchOptions): Promise<Dispatched>;
  /** Up to 1000 items in one transaction. */
  dispatchBulk(items: BulkItem[]): Promise<BulkResult[]>;
  get(id: string | number): Promise<Execution>;
  status(id: string | number): Promise<ExecutionStatus>;
  /** Rejects with WaitTimeout after timeoutMs (default 60000). */
  wait(id: string | number,
       options?: {timeoutMs?: number; pollMs?: number; statuses?: readonly ExecutionStatus[]}):
    Promise<Execution>;
  /** The result of a succeeded execution (Conflict before success). */
  result(id: string | number): Promise<Json>;
  cancel(id: string | number, reason?: string):
    Promise<{id: number; status: ExecutionStatus; cancel_requested: boolean; status_url: string}>;
  replay(id: string | number, reason: string, options?: {assume?: 'keep' | 'done' | 'not_done'}):
    Promise<{id: number; outcome: 'replayed' | 'pending_approval'; status: ExecutionStatus;
             status_url: string}>;
  list(filters?: ListFilters): Promise<Page>;
  /** Every execution matching filters, page after page. */
  executions(filters?: ListFilters): AsyncGenerator<Execution, void, undefined>;

  lease(request: {workerId: string; queues: string[]; max?: number; waitMs?: number;
                  signal?: AbortSignal; name?: string; host?: string; pid?: number;
                  version?: string; concurrency?: number; confirmStart?: boolean;
                  handlers?: string[]}): Promise<Lease[]>;
  heartbeats(workerId: string, items: Array<{id: string; claim_version: number; progress?: number;
                                             started?: boolean}>,
             processed?: number, failed?: number):
    Promise<Array<{id: string; ok: boolean; cancel_requested?: boolean;
                   error?: {code: string; message: string}}>>;
  workerCall(id: string, action: string, body: {[key: string]: Json}): Promise<any>;
}

export class JobContext {
  readonly lease: Lease;
  readonly id: string;
  readonly claimVersion: number;
  readonly job: string;
  readonly tenant: string | null;
  readonly attempt: number;
  readonly payload: Payload;
  readonly cancelRequested: boolean;
  readonly lost: boolean;
  /** "<execution id>:<name>": stable across retries and replays. */
  effectKey(name: string): string;
  /** 0..100, sent with the next heartbeat. */
  progress(percent: number): void;
  /** Rejects with LeaseLost when the claim is no longer current. */
  log(message: string, level?: 'debug' | 'info' | 'warn' | 'error'): Promise<void>;
  heartbeat(): Promise<void>;
  /** Throws Canceled or LeaseLost when the handler must stop (no network). */
  checkpoint(): void;
  /**
   * perform(effectKey) at most once per key; resolves to its detail (already_done: the
   * recorded one). Throws EffectAmbiguous (unless idempotent), Canceled or LeaseLost.
   */
  effect(name: string, perform: (effectKey: string) => unknown | Promise<unknown>,
         options?: {idempotent?: boolean}): Promise<string>;
}

export type Handler<P extends Payload = Payload> =
  (ctx: JobContext, payload: P) => Promise<Json | void> | Json | void;

export interface WorkerOptions {
  /** Default: new Client() (TASKENGINE_SERVER, TASKENGINE_TOKEN). */
  client?: Client;
  /** In priority order. Default ['default']. */
  queues?: string[];
  /** Handlers at once, the most leases held. Default 4. */
  concurrency?: number;
  /** Default "<hostname>:<pid>". */
  workerId?: string;
  name?: string;
  /** Lease long poll, at most 30000. Default 30000. */
  pollWaitMs?: number;
  /** run resolves after this many leases (0 = never). Default 0. */
  maxJobs?: number;
  idleHeartbeatMs?: number;
  reconnectMinMs?: number;
  reconnectMaxMs?: number;
  finishRetryForMs?: number;
  logger?: {info(...a: unknown[]): void; warn(...a: unknown[]): void; error(...a: unknown[]): void};
}

export interface WorkerStats {
  leased: number;
  completed: number;
  failed: number;
  released: number;
  /** Claims found stale or gone: nothing published. */
  lost: number;
  reconnects: number;
}

export class Worker {
  constructor(options?: WorkerOptions);
  readonly client: Client;
  readonly workerId: string;
  readonly stats: WorkerStats;
  job<P extends Payload = Payload>(name: string, handler: Handler<P>): this;
  /** Until stop(), SIGTERM/SIGINT (handleSignals, default true) or maxJobs. */
  run(options?: {handleSignals?: boolean}): Promise<WorkerStats>;
  stop(): void;
}

export class TaskengineError extends Error {
  readonly retryable: boolean;
}
export class TransportError extends TaskengineError {
  readonly httpStatus: 0;
  readonly code: 'unavailable';
}
export class ApiError extends TaskengineError {
  readonly httpStatus: number;
  readonly code: string;
  readonly apiMessage: string;
  readonly details: {[key: string]: Json};
}
export class BadRequest extends ApiError {}
export class Unauthenticated extends ApiError {}
export class Forbidden extends ApiError {}
export class NotFound extends ApiError {}
export class Conflict extends ApiError {}
export class IdempotencyConflict extends Conflict {
  readonly existingExecutionId: string;
}
export class Stale extends ApiError {}
export class TooManyRequests extends ApiError {
  readonly retryAfter: number;
}
export class Unavailable extends ApiError {}
export class WaitTimeout extends TaskengineError {
  readonly execution: Execution;
}

export class HandlerStop extends Error {}
export class Canceled extends HandlerStop {}
export class LeaseLost extends HandlerStop {}
export class EffectAmbiguous extends HandlerStop {
  readonly key: string;
}
export class RetryableError extends Error {
  constructor(message: string, options?: {retryAfterMs?: number});
  readonly retryAfterMs: number;
}
export class PermanentError extends Error {}
export class NotPerformed extends Error {}
