// Worker: runs registered async handlers for leased executions.
//
//   const worker = new Worker({queues: ['mail']});
//   worker.job('send-welcome', async (ctx, payload) => {
//     const msgId = await ctx.effect('send-sms', (key) => sms.send(payload.to, {dedup: key}));
//     return {message: msgId};
//   });
//   await worker.run();  // until SIGTERM/SIGINT or stop()
//
// What run does, as the C++ SDK's Worker (clients/cpp/README.md):
// - leases with a long poll for as many executions as it has free handler
//   slots (never more than `concurrency`), with confirm_start: it confirms the
//   start of each lease in one batch heartbeat and runs only those the server
//   confirmed, so leases it never received cost no attempt (L4);
// - heartbeats every held lease in one batch every min(lease)/3 from a timer
//   of its own, which learns cancel requests and lost claims (a handler that
//   blocks the event loop blocks heartbeats too: await between units of work);
// - reports each outcome: complete with the handler's result, fail with a
//   class, or release; a finish is retried while the server is away
//   (finishRetryForMs) and dropped when the claim turns out stale;
// - rides out a server that is down (backoff with jitter); a refused token
//   (401/403 on lease) rejects run with that error;
// - stop() (and SIGTERM/SIGINT): no more leasing, the open long poll is
//   aborted, leases not yet started are released, running handlers finish
//   and are reported, then run resolves.
// A job this worker has no handler for fails retryable, naming the job.
import os from 'node:os';

import {Client} from './client.js';
import {Canceled, EffectAmbiguous, JobContext, LeaseLost, PermanentError,
        RetryableError} from './context.js';
import {ApiError, TaskengineError} from './errors.js';
import {VERSION} from './version.js';

// Wakes those waiting on it; a wait also ends after its timeout.
class Notifier {
  constructor() {
    this.waiters = new Set();
  }

  wait(ms = Infinity) {
    return new Promise((resolve) => {
      let timer = null;
      const done = () => {
        if (timer !== null) clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      if (ms !== Infinity) timer = setTimeout(done, Math.max(0, ms));
      this.waiters.add(done);
    });
  }

  notify() {
    for (const done of [...this.waiters]) done();
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export class Worker {
  // client: default new Client() (TASKENGINE_SERVER, TASKENGINE_TOKEN).
  // queues: in priority order. Default ['default'].
  // concurrency: handlers running at once, the most leases held. Default 4.
  // pollWaitMs: the lease long poll (at most 30000). Default 30000.
  // maxJobs: run resolves after this many leases (0 = never). Default 0.
  // idleHeartbeatMs: registration heartbeats without leases. Default 10000.
  // finishRetryForMs: how long a finish is retried while the server is away. Default 300000.
  // logger: {info, warn, error}. Default console.
  constructor({client, queues = ['default'], concurrency = 4, workerId, name = '',
               pollWaitMs = 30000, maxJobs = 0, idleHeartbeatMs = 10000,
               reconnectMinMs = 100, reconnectMaxMs = 5000, finishRetryForMs = 300000,
               logger = console} = {}) {
    this.client = client ?? new Client();
    this.queues = queues.length ? [...queues] : ['default'];
    this.concurrency = Math.max(1, Math.min(Math.trunc(concurrency), 100));
    this.workerId = workerId || `${os.hostname() || 'worker'}:${process.pid}`;
    this.name = name;
    this.pollWaitMs = Math.max(0, Math.min(pollWaitMs, 30000));
    this.maxJobs = maxJobs;
    this.idleHeartbeatMs = idleHeartbeatMs;
    this.reconnectMinMs = Math.max(reconnectMinMs, 10);
    this.reconnectMaxMs = Math.max(reconnectMaxMs, this.reconnectMinMs);
    this.finishRetryForMs = finishRetryForMs;
    this.logger = logger;
    this.handlers = new Map();
    this.stopping = false;
    this.abort = null;  // the open long poll's AbortController
    this.held = new Map();  // "id/claim version" -> JobContext: leased, not yet reported
    this.running = new Set();  // promises of handler runs and their reports
    this.changed = new Notifier();  // a slot freed, stopping
    this.heartbeatWake = new Notifier();  // a new lease, done
    this.heartbeatDone = false;
    this.counts = {leased: 0, completed: 0, failed: 0, released: 0, lost: 0, reconnects: 0};
  }

  // Registers `fn(ctx, payload)` (async) as the handler of job `name`. Chainable.
  job(name, fn) {
    if (this.handlers.has(name)) throw new Error(`job ${name} already has a handler`);
    this.handlers.set(name, fn);
    return this;
  }

  // {leased, completed, failed, released, lost, reconnects}; lost: claims found
  // stale or gone, nothing published.
  get stats() {
    return {...this.counts};
  }

  // Graceful stop (see above). Idempotent.
  stop() {
    this.stopping = true;
    this.abort?.abort();
    this.changed.notify();
  }

  // Leases and runs until stop() or maxJobs; resolves to the stats. Rejects
  // with the ApiError that made it give up (401/403 on lease).
  async run({handleSignals = true} = {}) {
    if (this.handlers.size === 0) throw new Error('no handlers registered (use worker.job(name, fn))');
    const onSignal = () => this.stop();
    if (handleSignals) {
      process.on('SIGTERM', onSignal);
      process.on('SIGINT', onSignal);
    }
    const heartbeats = this.heartbeatLoop();
    let fatal = null;
    try {
      await this.leaseLoop();
    } catch (e) {
      fatal = e;
    }
    while (this.running.size) await Promise.all([...this.running]);
    this.heartbeatDone = true;
    this.heartbeatWake.notify();
    await heartbeats;
    if (handleSignals) {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
    }
    if (fatal) throw fatal;
    return this.stats;
  }

  async leaseLoop() {
    let backoff = this.reconnectMinMs;
    let lastError = '';
    while (!this.stopping) {
      while (!this.stopping && this.held.size >= this.concurrency) await this.changed.wait();
      if (this.stopping) return;
      if (this.maxJobs && this.counts.leased >= this.maxJobs) return;
      let free = this.concurrency - this.held.size;
      if (this.maxJobs) free = Math.min(free, this.maxJobs - this.counts.leased);
      this.abort = new AbortController();
      let leases;
      try {
        leases = await this.client.lease({
          workerId: this.workerId, queues: this.queues, max: Math.min(free, 100),
          waitMs: this.pollWaitMs, signal: this.abort.signal, name: this.name,
          host: os.hostname(), pid: process.pid, version: `taskengine-node/${VERSION}`,
          concurrency: this.concurrency, confirmStart: true,
        });
      } catch (e) {
        if (this.stopping) return;
        if (!(e instanceof TaskengineError)) throw e;
        if (e.httpStatus === 401 || e.httpStatus === 403) {
          this.logger.error(`taskengine worker ${this.workerId}: lease refused: ${e.message}`);
          throw e;
        }
        this.counts.reconnects++;
        if (e.message !== lastError) {
          this.logger.warn(`taskengine worker ${this.workerId}: cannot lease (${e.message}); retrying with backoff`);
        }
        lastError = e.message;
        await this.changed.wait(backoff + Math.random() * backoff / 2);
        backoff = Math.min(backoff * 2, this.reconnectMaxMs);
        continue;
      } finally {
        this.abort = null;
      }
      if (lastError) this.logger.info(`taskengine worker ${this.workerId}: server reachable again`);
      lastError = '';
      backoff = this.reconnectMinMs;
      if (!leases.length) continue;
      for (const lease of await this.confirmStarts(leases)) {
        const ctx = new JobContext(this.client, lease);
        this.held.set(`${lease.id}/${lease.claimVersion}`, ctx);
        this.counts.leased++;
        const run = this.runAndReport(ctx);
        this.running.add(run);
        run.finally(() => this.running.delete(run));
      }
      this.heartbeatWake.notify();
    }
  }

  async confirmStarts(leases) {
    const items = leases.map((l) => ({id: l.id, claim_version: l.claimVersion, started: true}));
    let confirmed = [];
    try {
      const answers = await this.client.heartbeats(this.workerId, items,
                                                   this.counts.completed + this.counts.failed,
                                                   this.counts.failed);
      if (answers.length === leases.length) {
        confirmed = leases.filter((_, i) => answers[i].ok);
      } else {
        this.logger.warn(`taskengine worker ${this.workerId}: could not confirm the start of ${leases.length} lease(s): unexpected answer`);
      }
    } catch (e) {
      // Unconfirmed leases lapse and, never started, are requeued at no attempt's cost.
      this.logger.warn(`taskengine worker ${this.workerId}: could not confirm the start of ${leases.length} lease(s): ${e.message}`);
    }
    const dropped = leases.length - confirmed.length;
    this.counts.leased += dropped;
    this.counts.lost += dropped;
    return confirmed;
  }

  async runAndReport(ctx) {
    // Leased while stopping: not started, given back so another worker runs it now.
    const outcome = this.stopping ? {kind: 'release'} : await this.runOne(ctx);
    await this.report(ctx, outcome);
  }

  async runOne(ctx) {
    const handler = this.handlers.get(ctx.job);
    if (!handler) {
      return {kind: 'fail', failureClass: 'retryable',
              error: `no handler for job ${ctx.job} on worker ${this.workerId} ` +
                     `(it runs: ${[...this.handlers.keys()].sort().join(', ')})`};
    }
    try {
      const result = await handler(ctx, ctx.payload);
      return {kind: 'complete', result};
    } catch (e) {
      if (e instanceof Canceled) return {kind: 'release'};  // released while cancel is requested
      if (e instanceof LeaseLost) {
        ctx.lost = true;
        return {kind: 'release'};
      }
      if (e instanceof EffectAmbiguous) return {kind: 'fail', failureClass: 'ambiguous', error: e.message};
      if (e instanceof PermanentError) return {kind: 'fail', failureClass: 'permanent', error: e.message};
      if (e instanceof RetryableError) {
        return {kind: 'fail', failureClass: 'retryable', error: e.message, retryAfterMs: e.retryAfterMs};
      }
      this.logger.error(`taskengine worker ${this.workerId}: handler of job ${ctx.job} threw:`, e);
      return {kind: 'fail', failureClass: 'retryable', error: `${e?.name ?? 'Error'}: ${e?.message ?? e}`};
    }
  }

  async report(ctx, outcome) {
    let lost = ctx.lost;
    if (!lost) {
      const body = {claim_version: ctx.claimVersion};
      if (outcome.kind === 'complete' && outcome.result !== undefined && outcome.result !== null) {
        body.result = outcome.result;
      } else if (outcome.kind === 'fail') {
        Object.assign(body, {class: outcome.failureClass, error: outcome.error,
                             retry_after_ms: outcome.retryAfterMs ?? 0});
      }
      if (outcome.kind !== 'complete') {
        const progress = ctx.takeProgress();
        if (progress !== null) {
          await this.client.workerCall(ctx.id, 'heartbeat', {claim_version: ctx.claimVersion, progress})
            .catch(() => {});
        }
      }
      const deadline = Date.now() + this.finishRetryForMs;
      let backoff = this.reconnectMinMs;
      for (;;) {
        try {
          await this.client.workerCall(ctx.id, outcome.kind, body);
          break;
        } catch (e) {
          if (e instanceof ApiError && (e.code === 'stale' || e.code === 'not_found')) {
            lost = true;
            break;
          }
          if (!e.retryable || Date.now() >= deadline) {
            this.logger.error(`taskengine worker ${this.workerId}: could not report execution ${ctx.id}: ${e.message}`);
            lost = true;
            break;
          }
        }
        await sleep(backoff);
        backoff = Math.min(backoff * 2, this.reconnectMaxMs);
      }
    }
    this.held.delete(`${ctx.id}/${ctx.claimVersion}`);
    if (lost) this.counts.lost++;
    else if (outcome.kind === 'complete') this.counts.completed++;
    else if (outcome.kind === 'fail') this.counts.failed++;
    else this.counts.released++;
    this.changed.notify();
  }

  async heartbeatLoop() {
    let last = Date.now();
    let reportedDown = false;
    for (;;) {
      for (;;) {
        if (this.heartbeatDone) return;
        let interval = this.idleHeartbeatMs;
        for (const ctx of this.held.values()) {
          if (ctx.lease.leaseMs > 0) interval = Math.min(interval, ctx.lease.leaseMs / 3);
        }
        const due = last + Math.max(interval, 20);
        if (Date.now() >= due) break;
        await this.heartbeatWake.wait(due - Date.now());
      }
      last = Date.now();
      const held = [...this.held.values()];
      const items = held.map((ctx) => {
        const item = {id: ctx.id, claim_version: ctx.claimVersion};
        const progress = ctx.takeProgress();
        if (progress !== null) item.progress = progress;
        return item;
      });
      let answers;
      try {
        answers = await this.client.heartbeats(this.workerId, items,
                                               this.counts.completed + this.counts.failed,
                                               this.counts.failed);
      } catch (e) {
        if (!reportedDown) this.logger.warn(`taskengine worker ${this.workerId}: heartbeat failed: ${e.message}`);
        reportedDown = true;
        continue;
      }
      reportedDown = false;
      // Answers come in request order: each applies to its own lease.
      if (answers.length === held.length) held.forEach((ctx, i) => ctx.apply(answers[i]));
    }
  }
}
