// What the scenario tests share: the live server's address and tokens (set by
// tests/clients/run.sh), workers run in this process or in a child process,
// and waits that fail instead of hanging.
import {spawn} from 'node:child_process';
import {existsSync, readFileSync} from 'node:fs';
import path from 'node:path';
import {fileURLToPath} from 'node:url';

import {Client, Worker} from '../index.js';

export const HERE = path.dirname(fileURLToPath(import.meta.url));

export function env(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run this test through tests/clients/run.sh node`);
  return value;
}

export function scenarios() {
  return JSON.parse(readFileSync(env('TASKENGINE_TEST_SCENARIOS'), 'utf8')).scenarios;
}

const clients = new Map();

// One client per token variable for the whole run (closeClients closes them).
export function client(tokenVariable) {
  if (!clients.has(tokenVariable)) {
    clients.set(tokenVariable, new Client({server: env('TASKENGINE_SERVER'), token: env(tokenVariable)}));
  }
  return clients.get(tokenVariable);
}
export const admin = () => client('TASKENGINE_TOKEN');
export const workerClient = () => client('TASKENGINE_TEST_WORKER_TOKEN');
export const tenantClient = () => client('TASKENGINE_TEST_TENANT_TOKEN');
export function closeClients() {
  for (const c of clients.values()) c.close();
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export async function waitUntil(done, what, timeoutMs = 20000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

const quiet = {info() {}, warn() {}, error() {}};

// Runs `body(worker)` while a Worker of `queue` with `handlers` runs in this
// process; stops it afterwards and rethrows what made it fail.
export async function withWorker(queue, handlers, body) {
  const worker = new Worker({client: workerClient(), queues: [queue], concurrency: 2,
                             pollWaitMs: 1000, logger: quiet});
  for (const [job, fn] of Object.entries(handlers)) worker.job(job, fn);
  const running = worker.run({handleSignals: false});
  let failure = null;
  running.catch((e) => { failure = e; });
  try {
    return await body(worker);
  } finally {
    worker.stop();
    await running.catch(() => {});
    if (failure) throw failure;
  }
}

// test/child_worker.js MODE in a child process; `events` is its event file.
export class ChildWorker {
  constructor(mode, name) {
    const work = env('TASKENGINE_TEST_WORK');
    this.events = path.join(work, `node-${name}.events`);
    this.go = path.join(work, `node-${name}.go`);
    this.stdout = '';
    this.exited = new Promise((resolve) => {
      this.process = spawn(process.execPath, [path.join(HERE, 'child_worker.js'), mode, this.events, this.go],
                           {env: {...process.env, TASKENGINE_TOKEN: env('TASKENGINE_TEST_WORKER_TOKEN')},
                            stdio: ['ignore', 'pipe', 'inherit']});
      this.process.stdout.on('data', (chunk) => { this.stdout += chunk; });
      this.process.on('exit', (code, signal) => resolve({code, signal}));
    });
  }

  get running() {
    return this.process.exitCode === null && this.process.signalCode === null;
  }

  lines() {
    if (!existsSync(this.events)) return [];
    return readFileSync(this.events, 'utf8').split('\n').map((l) => l.trim()).filter(Boolean);
  }

  async waitForEvent(prefix, timeoutMs = 20000) {
    let found;
    await waitUntil(() => {
      found = this.lines().find((line) => line.startsWith(prefix));
      if (!found && !this.running) {
        throw new Error(`the child worker exited before ${prefix}; events: ${this.lines()}`);
      }
      return Boolean(found);
    }, `child event ${prefix}`, timeoutMs);
    return found;
  }

  signal(name) {
    if (this.running) this.process.kill(name);
  }

  // SIGTERM, then the stats it prints at exit.
  async finish() {
    this.signal('SIGTERM');
    const {code, signal} = await this.exited;
    if (code !== 0) throw new Error(`the child worker exited ${code ?? signal}: ${this.stdout}`);
    return JSON.parse(this.stdout.trim().split('\n').pop());
  }

  async kill() {
    if (this.running) {
      this.process.kill('SIGCONT');
      this.process.kill('SIGKILL');
    }
    await this.exited;
  }
}
