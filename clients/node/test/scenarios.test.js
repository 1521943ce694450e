// The client conformance scenarios (clients/scenarios.json) against a live
// server: one test per scenario id; an id without an implementation here fails.
// Run through tests/clients/run.sh node (ctest clients_node_test).
import assert from 'node:assert/strict';
import {spawn} from 'node:child_process';
import {randomUUID} from 'node:crypto';
import {writeFileSync} from 'node:fs';
import path from 'node:path';
import {after, test} from 'node:test';

import {Canceled, Client, IdempotencyConflict, NotFound, Unauthenticated, Worker} from '../index.js';
import * as h from './harness.js';

const unique = (prefix) => `${prefix}-${randomUUID().slice(0, 12)}`;

async function dispatchIdempotency(s) {
  const client = h.admin();
  const key = unique('node-key');
  const first = await client.dispatch(s.job, {n: 1}, {idempotencyKey: key});
  assert.equal(first.created, true);
  assert.equal(first.status, 'queued');
  assert.equal(first.statusUrl, `/api/v1/executions/${first.id}`);
  const again = await client.dispatch(s.job, {n: 1}, {idempotencyKey: key});
  assert.deepEqual([again.id, again.created], [first.id, false]);
  await assert.rejects(client.dispatch(s.job, {n: 2}, {idempotencyKey: key}), (e) => {
    assert.ok(e instanceof IdempotencyConflict, String(e));
    assert.equal(e.httpStatus, 409);
    assert.equal(e.existingExecutionId, first.id);
    return true;
  });

  const bulk = await client.dispatchBulk([
    {job: s.job, payload: {n: 1}, idempotencyKey: key},
    {job: s.job, payload: {n: 2}, idempotencyKey: key},
    {job: s.job, payload: {n: 3}, idempotencyKey: unique('node-key'), delayMs: 60000, lane: 'node-lane'},
  ]);
  assert.deepEqual(bulk.slice(0, 2).map((r) => [r.id, r.created, r.conflict]),
                   [[first.id, false, false], [first.id, false, true]]);
  assert.equal(bulk[2].created, true);
  assert.notEqual(bulk[2].id, first.id);
  assert.equal((await client.get(bulk[2].id)).lane_key, 'node-lane');

  const runAt = new Date(Date.now() + 3600 * 1000);
  const later = await client.dispatch(s.job, {n: 4}, {runAt});
  const execution = await client.get(later.id);
  assert.equal(execution.status, 'queued');
  assert.ok(execution.run_at.startsWith(runAt.toISOString().slice(0, 16)), execution.run_at);
}

async function listPagination(s) {
  const client = h.admin();
  const ids = [];
  for (let i = 0; i < s.count; i++) ids.push((await client.dispatch(s.job, {i})).id);
  const seen = [];
  let cursor;
  for (;;) {
    const page = await client.list({job: s.job, status: ['queued'], limit: s.page_size, cursor});
    assert.ok(page.items.length <= s.page_size);
    seen.push(...page.items.map((e) => String(e.id)));
    if (!page.nextCursor) break;
    cursor = page.nextCursor;
  }
  assert.deepEqual(seen, [...ids].sort((a, b) => Number(b) - Number(a)));
  const all = [];
  for await (const e of client.executions({job: s.job, limit: 2})) all.push(String(e.id));
  assert.deepEqual(all, seen);
}

async function effectCompletes(s) {
  const client = h.admin();
  const sunk = [];
  const handler = async (ctx) => {
    const detail = await ctx.effect(s.effect, async (key) => {
      sunk.push(key);
      return `sms-${sunk.length}`;
    });
    await ctx.log('sms sent');
    ctx.progress(100);
    return {sms: detail};
  };
  const d = await client.dispatch(s.job, {to: '+15550100'});
  const execution = await h.withWorker(s.queue, {[s.job]: handler},
                                       () => client.wait(d.id, {timeoutMs: 20000}));
  assert.equal(execution.status, 'succeeded', JSON.stringify(execution));
  assert.deepEqual(await client.result(d.id), {sms: 'sms-1'});
  const key = `${d.id}:${s.effect}`;
  assert.deepEqual(sunk, [key]);
  assert.deepEqual(execution.effects.map((e) => [e.name, e.key, e.state, e.detail]),
                   [[s.effect, key, 'committed', 'sms-1']]);
  assert.ok(execution.logs.some((line) => line.message === 'sms sent'));
}

async function crashBetweenEffectAndCommit(s) {
  const client = h.admin();
  const d = await client.dispatch(s.job, {amount: 42});
  const child = new h.ChildWorker('crash', unique('crash'));
  try {
    await child.waitForEvent('sink ');
  } finally {
    await child.kill();
  }
  const sunkAgain = [];
  const handler = async (ctx) => ({
    charged: await ctx.effect(s.effect, async (key) => {
      sunkAgain.push(key);
      return 'charge-2';
    }),
  });
  const execution = await h.withWorker(s.queue, {[s.job]: handler}, async () => {
    const quarantined = await client.wait(d.id, {timeoutMs: 30000});
    assert.equal(quarantined.status, 'quarantined', JSON.stringify(quarantined));
    assert.equal(quarantined.failure_class, 'ambiguous');
    assert.deepEqual(sunkAgain, []);
    assert.deepEqual(child.lines(), [`sink ${d.id}:${s.effect}`]);
    assert.deepEqual(quarantined.effects.map((e) => [e.name, e.state]), [[s.effect, 'reserved']]);
    const replay = await client.replay(d.id, 'the card gateway shows the charge', {assume: 'done'});
    assert.equal(replay.outcome, 'replayed');
    return client.wait(d.id, {timeoutMs: 20000});
  });
  assert.equal(execution.status, 'succeeded', JSON.stringify(execution));
  assert.deepEqual(sunkAgain, []);
  assert.equal(child.lines().length, 1);
}

async function stoppedWorkerIsStale(s) {
  const client = h.admin();
  const d = await client.dispatch(s.job, {});
  const child = new h.ChildWorker('stall', unique('stall'));
  let stats;
  try {
    assert.equal(await child.waitForEvent('started '), `started ${d.id}`);
    child.signal('SIGSTOP');
    const execution = await h.withWorker(s.queue, {[s.job]: async () => ({by: 'second'})},
                                         () => client.wait(d.id, {timeoutMs: 30000}));
    assert.equal(execution.status, 'succeeded', JSON.stringify(execution));
    child.signal('SIGCONT');
    writeFileSync(child.go, '');
    await child.waitForEvent('stale');
    stats = await child.finish();
  } finally {
    await child.kill();
  }
  assert.deepEqual([stats.lost, stats.completed], [1, 0], JSON.stringify(stats));
  assert.deepEqual(await client.result(d.id), {by: 'second'});
  assert.equal(await client.status(d.id), 'succeeded');
}

async function longHandlerKeepsLease(s) {
  const client = h.admin();
  const handler = async (ctx) => {
    ctx.progress(50);
    await h.sleep(s.block_ms);
    return {slept_ms: s.block_ms};
  };
  const d = await client.dispatch(s.job, {});
  const execution = await h.withWorker(s.queue, {[s.job]: handler},
                                       () => client.wait(d.id, {timeoutMs: 20000}));
  assert.deepEqual([execution.status, execution.attempt], ['succeeded', 1], JSON.stringify(execution));
  assert.equal(execution.consecutive_lease_expiries, 0);
  assert.deepEqual(await client.result(d.id), {slept_ms: s.block_ms});
}

async function sigtermFinishesRunningHandler(s) {
  const client = h.admin();
  const d = await client.dispatch(s.job, {});
  const child = new h.ChildWorker('graceful', unique('graceful'));
  let stats;
  try {
    assert.equal(await child.waitForEvent('started '), `started ${d.id}`);
    stats = await child.finish();
  } finally {
    await child.kill();
  }
  assert.deepEqual([stats.completed, stats.leased], [1, 1], JSON.stringify(stats));
  const execution = await client.get(d.id);
  assert.deepEqual([execution.status, execution.attempt], ['succeeded', 1], JSON.stringify(execution));
  assert.deepEqual(await client.result(d.id), {finished: true});
}

async function cancelSeenByHandler(s) {
  const client = h.admin();
  let started = false;
  let seen = false;
  const handler = async (ctx) => {
    started = true;
    const deadline = Date.now() + 20000;
    while (Date.now() < deadline) {
      try {
        ctx.checkpoint();
      } catch (e) {
        if (e instanceof Canceled) seen = true;
        throw e;
      }
      await h.sleep(20);
    }
    return {cancel: 'never seen'};
  };
  const d = await client.dispatch(s.job, {});
  const execution = await h.withWorker(s.queue, {[s.job]: handler}, async () => {
    await h.waitUntil(() => started, 'the handler to start');
    const answer = await client.cancel(d.id, 'the customer withdrew');
    assert.equal(answer.cancel_requested, true, JSON.stringify(answer));
    return client.wait(d.id, {timeoutMs: 20000});
  });
  assert.equal(seen, true);
  assert.equal(execution.status, 'canceled', JSON.stringify(execution));
}

async function badToken401() {
  const bad = new Client({server: h.env('TASKENGINE_SERVER'), token: 'te_not_a_token'});
  try {
    for (const call of [() => bad.get('1'), () => bad.dispatch('sdk-echo', {})]) {
      await assert.rejects(call(), (e) => e instanceof Unauthenticated && e.httpStatus === 401);
    }
    const worker = new Worker({client: bad, queues: ['sdk-idle'], pollWaitMs: 500,
                               logger: {info() {}, warn() {}, error() {}}});
    worker.job('sdk-echo', async () => null);
    await assert.rejects(worker.run({handleSignals: false}), Unauthenticated);
  } finally {
    bad.close();
  }
}

async function otherTenant404(s) {
  const theirs = await h.admin().dispatch(s.job, {store: 2}, {tenant: 'b'});
  const mine = h.tenantClient();
  for (const id of [theirs.id, '987654321']) {
    for (const call of [(x) => mine.get(x), (x) => mine.cancel(x), (x) => mine.result(x)]) {
      await assert.rejects(call(id), (e) => e instanceof NotFound && e.httpStatus === 404);
    }
  }
  const own = await mine.dispatch(s.job, {store: 1}, {tenant: 'a'});
  assert.equal((await mine.get(own.id)).tenant, 'a');
}

async function examplesRun() {
  const examples = path.join(h.HERE, '..', 'examples');
  const worker = spawn(process.execPath, [path.join(examples, 'worker.js')],
                       {env: {...process.env, TASKENGINE_TOKEN: h.env('TASKENGINE_TEST_WORKER_TOKEN')},
                        stdio: ['ignore', 'pipe', 'pipe']});
  let workerOut = '';
  worker.stdout.on('data', (c) => { workerOut += c; });
  worker.stderr.on('data', (c) => { workerOut += c; });
  const exited = new Promise((resolve) => worker.on('exit', (code) => resolve(code)));
  const outputs = [];
  try {
    for (let i = 0; i < 2; i++) {
      // Asynchronous: the test process's event loop stays free.
      const run = await new Promise((resolve) => {
        const p = spawn(process.execPath, [path.join(examples, 'dispatcher.js')], {stdio: ['ignore', 'pipe', 'pipe']});
        let out = '';
        p.stdout.on('data', (c) => { out += c; });
        p.stderr.on('data', (c) => { out += c; });
        p.on('exit', (code) => resolve({code, out}));
      });
      assert.equal(run.code, 0, run.out);
      outputs.push(run.out);
    }
  } finally {
    worker.kill('SIGTERM');
  }
  const code = await exited;
  assert.match(outputs[0], /created/);
  assert.match(outputs[1], /already dispatched/);
  for (const out of outputs) {
    assert.match(out, /succeeded/);
    assert.match(out, /message_id/);
  }
  assert.equal(code, 0, workerOut);
  assert.equal(workerOut.split('SMS to +15550100').length - 1, 1, workerOut);
}

const IMPLEMENTED = {
  dispatch_idempotency: dispatchIdempotency,
  list_pagination: listPagination,
  effect_completes: effectCompletes,
  crash_between_effect_and_commit: crashBetweenEffectAndCommit,
  stopped_worker_is_stale: stoppedWorkerIsStale,
  long_handler_keeps_lease: longHandlerKeepsLease,
  sigterm_finishes_running_handler: sigtermFinishesRunningHandler,
  cancel_seen_by_handler: cancelSeenByHandler,
  bad_token_401: badToken401,
  other_tenant_404: otherTenant404,
  examples_run: examplesRun,
};

after(() => h.closeClients());

for (const scenario of h.scenarios()) {
  test(`${scenario.id}: ${scenario.title}`, async () => {
    const run = IMPLEMENTED[scenario.id];
    if (!run) assert.fail(`scenario ${scenario.id} (${scenario.title}) is not implemented by the Node client's tests`);
    await run(scenario);
  });
}
