// JobContext: a handler's window on its leased execution, and the errors that
// end a handler run with a given outcome. A handler resolves to its result
// (any JSON value) or throws:
//   RetryableError / any other error -> fail, class retryable (retried with backoff)
//   PermanentError                   -> fail, class permanent (quarantined)
//   EffectAmbiguous                  -> fail, class ambiguous (quarantined)
//   Canceled                         -> released while cancel is requested: ends canceled
//   LeaseLost                        -> nothing is published (another claim owns it)
import {NotFound, Stale} from './errors.js';

// Base of the errors that stop a handler on the SDK's behalf.
export class HandlerStop extends Error {
  constructor(message) {
    super(message);
    this.name = new.target.name;
  }
}
// Cancellation was requested: the handler stops; the execution ends canceled.
export class Canceled extends HandlerStop {}
// This claim is no longer current (stale): nothing the handler does is published.
export class LeaseLost extends HandlerStop {}
// An earlier claim reserved the effect and never confirmed it; its outcome is unknown.
export class EffectAmbiguous extends HandlerStop {
  constructor(key) {
    super(`effect ${key} was reserved by an earlier attempt that never confirmed it; ` +
          'its outcome is unknown');
    this.key = key;
  }
}

// Fail this attempt; the server retries after its backoff (or retryAfterMs).
export class RetryableError extends Error {
  constructor(message, {retryAfterMs = 0} = {}) {
    super(message);
    this.name = 'RetryableError';
    this.retryAfterMs = retryAfterMs;
  }
}
// Fail for good: retrying cannot help (the execution is quarantined).
export class PermanentError extends Error {
  constructor(message) {
    super(message);
    this.name = 'PermanentError';
  }
}
// Thrown by an effect function: the effect certainly did not happen, so the
// reservation is given back and a retry proceeds. Any other error leaves the
// effect's outcome unknown.
export class NotPerformed extends Error {
  constructor(message) {
    super(message);
    this.name = 'NotPerformed';
  }
}

export class JobContext {
  constructor(client, lease) {
    this.client = client;
    this.lease = lease;
    this.progressValue = null;
    this.sentProgress = null;
    this.cancelRequested = false;
    this.lost = false;
  }

  get id() { return this.lease.id; }
  get claimVersion() { return this.lease.claimVersion; }
  get job() { return this.lease.job; }
  get tenant() { return this.lease.tenant; }
  get attempt() { return this.lease.attempt; }
  get payload() { return this.lease.payload; }

  // "<execution id>:<name>": stable across retries and replays.
  effectKey(name) {
    return this.lease.effectKeyPrefix + name;
  }

  // Records progress (clamped to 0..100); sent with the next heartbeat.
  progress(percent) {
    this.progressValue = Math.max(0, Math.min(100, Math.round(percent)));
  }

  // Appends a log line (level debug, info, warn, error). Rejects with LeaseLost
  // when the claim is no longer current.
  async log(message, level = 'info') {
    await this.call('log', {level, message});
  }

  // Extends the lease now (the worker also does on its own), then checkpoint().
  async heartbeat() {
    const body = {};
    const progress = this.takeProgress();
    if (progress !== null) body.progress = progress;
    const doc = await this.call('heartbeat', body);
    this.apply({ok: true, cancel_requested: Boolean(doc?.cancel_requested)});
    this.checkpoint();
  }

  // A cheap cancellation point (no network): throws Canceled or LeaseLost when
  // the last heartbeat learned that the handler must stop.
  checkpoint() {
    if (this.lost) throw new LeaseLost(`execution ${this.id}: claim ${this.claimVersion} is no longer current`);
    if (this.cancelRequested) throw new Canceled(`execution ${this.id}: cancellation was requested`);
  }

  // Performs `perform(effectKey)` at most once per effect key; resolves to its detail.
  //   proceed       perform runs; what it returns (a string, or JSON of another
  //                 value) is committed as the detail and returned
  //   already_done  perform does not run; the recorded detail is returned
  //   ambiguous     an earlier claim reserved it and never confirmed: with
  //                 {idempotent: true} (the sink deduplicates by the key)
  //                 perform runs again with the same key; otherwise
  //                 EffectAmbiguous is thrown (the execution is quarantined)
  //   canceled      Canceled is thrown: start no new effect
  //   stale         LeaseLost is thrown
  // perform throwing NotPerformed gives the reservation back (a retry
  // proceeds); any other error leaves the outcome unknown.
  async effect(name, perform, {idempotent = false} = {}) {
    const answer = await this.call(`effects/${encodeURIComponent(name)}/reserve`, {});
    const key = answer.key || this.effectKey(name);
    switch (answer.answer) {
      case 'already_done':
        return answer.detail ?? '';
      case 'canceled':
        this.cancelRequested = true;
        throw new Canceled(`execution ${this.id}: cancellation was requested before effect ${key}`);
      case 'ambiguous':
        if (!idempotent) throw new EffectAmbiguous(key);
        break;
      case 'proceed':
        break;
      default:
        throw new RetryableError(`effect ${key}: unexpected answer ${answer.answer}`);
    }
    let detail;
    try {
      detail = await perform(key);
    } catch (e) {
      if (e instanceof NotPerformed && answer.answer === 'proceed') {
        await this.call(`effects/${encodeURIComponent(name)}/release`, {});
      }
      throw e;
    }
    if (detail === undefined || detail === null) detail = '';
    else if (typeof detail !== 'string') detail = JSON.stringify(detail);
    await this.call(`effects/${encodeURIComponent(name)}/commit`, {detail});
    return detail;
  }

  // ---- used by Worker

  // Applies a heartbeat answer for this lease.
  apply(answer) {
    if (!answer.ok) {
      const code = answer.error?.code;
      if (code === 'stale' || code === 'not_found') this.lost = true;
      return;
    }
    if (answer.cancel_requested) this.cancelRequested = true;
  }

  // The progress to send, if it changed since the last call (else null).
  takeProgress() {
    if (this.progressValue === null || this.progressValue === this.sentProgress) return null;
    this.sentProgress = this.progressValue;
    return this.progressValue;
  }

  async call(action, body) {
    if (this.lost) throw new LeaseLost(`execution ${this.id}: claim ${this.claimVersion} is no longer current`);
    try {
      return await this.client.workerCall(this.id, action, {claim_version: this.claimVersion, ...body});
    } catch (e) {
      if (e instanceof Stale || e instanceof NotFound) {
        this.lost = true;
        throw new LeaseLost(`execution ${this.id}: ${e.message}`);
      }
      throw e;
    }
  }
}
