// Client: the public HTTP API (/api/v1) of a taskengine server.
//
//   const client = new Client();  // TASKENGINE_SERVER and TASKENGINE_TOKEN
//   const d = await client.dispatch('resize', {image: 7},
//                                   {tenant: 'acme', idempotencyKey: 'resize-7'});
//   const execution = await client.wait(d.id, {timeoutMs: 60000});
//
// Failures reject with the classes of errors.js. Ids are decimal strings (a
// number is accepted wherever an id is passed). Reads, cancels and dispatches
// that carry an idempotency key are retried after a transport error or a
// 429/5xx answer; other writes are sent once.
import {WaitTimeout} from './errors.js';
import {Transport} from './transport.js';
import {VERSION} from './version.js';

export const TERMINAL_STATUSES = Object.freeze(
  ['succeeded', 'failed', 'quarantined', 'canceled', 'partially_canceled']);
export const DEFAULT_SERVER = 'http://127.0.0.1:8080';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const idOf = (value) => (value === null || value === undefined ? '' : String(value));
const seg = (value) => encodeURIComponent(String(value));

// The JSON body of a dispatch (single, or one bulk item).
export function dispatchBody(payload, {tenant, runAt, delayMs, lane, parent} = {}) {
  const body = {payload: payload ?? {}};
  if (tenant) body.tenant = tenant;
  if (runAt !== undefined && delayMs !== undefined) throw new TypeError('give runAt or delayMs, not both');
  if (runAt !== undefined) body.run_at = runAt instanceof Date ? runAt.toISOString() : String(runAt);
  if (delayMs !== undefined) body.delay_ms = Math.round(delayMs);
  if (lane) body.lane = lane;
  if (parent !== undefined) body.parent = Number(parent);
  return body;
}

function dispatched(doc) {
  return {id: idOf(doc.id), status: doc.status, created: Boolean(doc.created),
          statusUrl: doc.status_url ?? ''};
}

export class Client {
  // server: default TASKENGINE_SERVER, else http://127.0.0.1:8080.
  // token: default TASKENGINE_TOKEN (none when unset).
  // timeoutMs: per call (long polls add their wait). Default 30000.
  // retries: extra tries of idempotent calls. Default 2.
  constructor({server, token, timeoutMs = 30000, retries = 2} = {}) {
    this.server = server || process.env.TASKENGINE_SERVER || DEFAULT_SERVER;
    this.http = new Transport(this.server, {
      token: token ?? process.env.TASKENGINE_TOKEN ?? '', timeoutMs, retries,
      userAgent: `taskengine-node/${VERSION}`,
    });
  }

  get timeoutMs() {
    return this.http.timeoutMs;
  }

  // Closes kept-alive connections (lets the process exit at once).
  close() {
    this.http.close();
  }

  // ---- dispatch

  // Admits one execution: {id, status, created, statusUrl}; created is false
  // for a repeat of an earlier idempotency key (200). Rejects with
  // IdempotencyConflict (existingExecutionId) when the key was used with a
  // different payload; nothing is created then.
  async dispatch(job, payload = {}, {idempotencyKey, ...options} = {}) {
    const headers = idempotencyKey ? {'Idempotency-Key': idempotencyKey} : {};
    const doc = await this.http.call('POST', `/api/v1/jobs/${seg(job)}/dispatch`,
                                     dispatchBody(payload, options),
                                     {headers, idempotent: Boolean(idempotencyKey)});
    return dispatched(doc);
  }

  // Admits up to 1000 executions in one transaction. Items: {job, payload,
  // tenant, idempotencyKey, runAt, delayMs, lane, parent}. Results in request
  // order: {index, id, status, created, conflict, statusUrl, error}; conflict:
  // the key was used with another payload, id names the existing execution.
  async dispatchBulk(items) {
    const body = items.map(({job, payload, idempotencyKey, ...options}) => {
      const entry = dispatchBody(payload, options);
      entry.job = job;
      if (idempotencyKey) entry.idempotency_key = idempotencyKey;
      return entry;
    });
    const keyed = body.every((entry) => entry.idempotency_key);
    const doc = await this.http.call('POST', '/api/v1/dispatch/bulk', {items: body},
                                     {idempotent: keyed});
    return (doc.items ?? []).map((r, i) => ({
      index: r.index ?? i, id: idOf(r.id), status: r.status, created: Boolean(r.created),
      conflict: Boolean(r.conflict), statusUrl: r.status_url ?? '', error: r.error ?? null,
    }));
  }

  // ---- executions

  // Everything about one execution (payload, logs, effects, attempts, audit).
  get(id) {
    return this.http.call('GET', `/api/v1/executions/${seg(id)}`, null, {idempotent: true});
  }

  async status(id) {
    return (await this.get(id)).status;
  }

  // Polls until the execution reaches one of `statuses` (default: ended);
  // rejects with WaitTimeout after timeoutMs.
  async wait(id, {timeoutMs = 60000, pollMs = 200, statuses = TERMINAL_STATUSES} = {}) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const execution = await this.get(id);
      if (statuses.includes(execution.status)) return execution;
      if (Date.now() >= deadline) throw new WaitTimeout(execution, timeoutMs);
      await sleep(Math.min(pollMs, Math.max(0, deadline - Date.now())));
    }
  }

  // The JSON result of a succeeded execution (Conflict before success).
  async result(id) {
    const doc = await this.http.call('GET', `/api/v1/executions/${seg(id)}/result`, null,
                                     {idempotent: true});
    return doc.result ?? null;
  }

  // Cancels: at once when not running, else cancel_requested for its worker.
  cancel(id, reason = '') {
    return this.http.call('POST', `/api/v1/executions/${seg(id)}/cancel`,
                          reason ? {reason} : {}, {idempotent: true});
  }

  // Queues a failed or quarantined execution again under its id. assume
  // ('keep', 'done', 'not_done'): what to take of effects an earlier claim
  // reserved and never confirmed. outcome: 'replayed' or 'pending_approval'.
  replay(id, reason, {assume} = {}) {
    const body = {reason};
    if (assume) body.assume = assume;
    return this.http.call('POST', `/api/v1/executions/${seg(id)}/replay`, body);
  }

  // One page of executions, newest first: {items, nextCursor (null at the
  // end), total}. Filters: job, tenant, status and trigger (a string or an
  // array: any of them), limit, cursor, offset, queuedFrom, queuedTo,
  // endedFrom, endedTo.
  async list(filters = {}) {
    const names = {queuedFrom: 'queued_from', queuedTo: 'queued_to', endedFrom: 'ended_from',
                   endedTo: 'ended_to'};
    const query = new URLSearchParams();
    for (const [key, value] of Object.entries(filters)) {
      if (value === undefined || value === null || value === '') continue;
      query.set(names[key] ?? key, Array.isArray(value) ? value.join(',') : String(value));
    }
    const qs = query.toString();
    const doc = await this.http.call('GET', '/api/v1/executions' + (qs ? '?' + qs : ''), null,
                                     {idempotent: true});
    return {items: doc.items ?? [], nextCursor: doc.next_cursor || null, total: doc.total};
  }

  // Every execution matching `filters` (those of list), page after page.
  async* executions(filters = {}) {
    let cursor;
    for (;;) {
      const page = await this.list({...filters, cursor});
      yield* page.items;
      if (!page.nextCursor) return;
      cursor = page.nextCursor;
    }
  }

  // ---- the worker protocol (used by Worker; see docs/openapi.json)

  async lease({workerId, queues, max = 1, waitMs = 0, signal, ...registration}) {
    const body = {worker_id: workerId, queues, max, wait_ms: waitMs};
    const names = {confirmStart: 'confirm_start'};
    for (const [key, value] of Object.entries(registration)) {
      if (value !== undefined && value !== '' && value !== null) body[names[key] ?? key] = value;
    }
    const doc = await this.http.call('POST', '/api/v1/worker/lease', body,
                                     {timeoutMs: this.http.timeoutMs + waitMs, signal});
    return (doc.leases ?? []).map((l) => ({
      id: idOf(l.id), claimVersion: Number(l.claim_version ?? 0), job: l.job ?? '',
      tenant: l.tenant ?? null, queue: l.queue ?? '', attempt: Number(l.attempt ?? 0),
      payload: l.payload ?? {}, leaseMs: Number(l.lease_ms ?? 0),
      effectKeyPrefix: l.effect_key_prefix ?? '', idempotencyKey: l.idempotency_key ?? null,
      raw: l,
    }));
  }

  // One answer per item, in order: {id, ok, cancel_requested, error}.
  async heartbeats(workerId, items, processed = 0, failed = 0) {
    const doc = await this.http.call('POST', '/api/v1/worker/heartbeats',
                                     {worker_id: workerId, items, processed, failed});
    return doc.items ?? [];
  }

  // POST /api/v1/worker/executions/{id}/{action} (heartbeat, log, complete, ...).
  workerCall(id, action, body) {
    return this.http.call('POST', `/api/v1/worker/executions/${seg(id)}/${action}`, body);
  }
}
