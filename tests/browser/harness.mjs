// The browser tests' harness: a real `taskengine serve` on an ephemeral port
// over a throwaway SQLite database (users made with `taskengine user:add`),
// and Debian's chromium driven by playwright-core.
//
// Environment (set by CMake's ctest entry): TASKENGINE_BIN, the built binary.
// Missing chromium or node_modules fail (not skip) with what to run.
import {spawn, spawnSync} from 'node:child_process';
import {existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs';
import {createRequire} from 'node:module';
import {tmpdir} from 'node:os';
import path from 'node:path';
import {fileURLToPath} from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const CHROMIUM = process.env.TASKENGINE_CHROMIUM || '/usr/bin/chromium';

export function requirements() {
  const problems = [];
  if (!existsSync(CHROMIUM)) problems.push(`no browser at ${CHROMIUM} (Debian package chromium)`);
  if (!existsSync(path.join(here, 'node_modules', 'playwright-core'))) {
    problems.push('tests/browser/node_modules is missing (npm ci)');
  }
  if (!process.env.TASKENGINE_BIN || !existsSync(process.env.TASKENGINE_BIN)) {
    problems.push('TASKENGINE_BIN does not name the built taskengine binary');
  }
  if (problems.length) {
    throw new Error('browser tests cannot run: ' + problems.join('; ') +
                    '. Run `scripts/deps.sh test` (installs chromium and runs npm ci in tests/browser).');
  }
}

export const PASSWORDS = {admin: 'pw-admin-12345', alice: 'pw-alice-12345', victor: 'pw-victor-12345'};
export const XSS = '<img src=x onerror=alert(1)>';

const CONFIG = `
[engine]
worker_threads = 3
poll_interval_ms = 50
sweep_interval_ms = 200
shutdown_grace_ms = 2000

# Every test logs in from 127.0.0.1: more than the default 10 per minute.
[http]
login_per_minute = 120

[[queue]]
name = "default"

# Only the remote worker of the tests leases from it; no job uses it.
[[queue]]
name = "remote"

[[job]]
name = "hello"
display_name = "Hello"
handler = "command"
max_attempts = 1
config = { argv = ["/bin/sh", "-c", '''
payload=$(cat)
echo "hello from execution $TASKENGINE_EXECUTION_ID"
printf '{"result": {"greeting": "hello", "payload": %s}}\\n' "$payload"
'''] }

[[job]]
name = "sleepy"
handler = "command"
max_attempts = 1
timeout_ms = 120000
config = { argv = ["/bin/sleep", "60"] }

[[job]]
name = "hostile"
handler = "command"
max_attempts = 1
config = { argv = ["/bin/sh", "-c", "echo '${XSS}'; echo '${XSS}' >&2; exit 65"] }

[[job]]
name = "nightly"
handler = "command"
schedule = "0 3 * * *"
timezone = "Europe/Paris"
config = { argv = ["/bin/true"] }

[[job]]
name = "per-store"
handler = "command"
scope = "per_tenant"
max_attempts = 1
config = { argv = ["/bin/sh", "-c", "echo '{\\"result\\": \\"done\\"}'"] }

[[job]]
name = "store-fail"
handler = "command"
scope = "per_tenant"
max_attempts = 1
config = { argv = ["/bin/sh", "-c", "echo 'store sync refused' >&2; exit 1"] }

[[job]]
name = "audited"
handler = "command"
config = { argv = ["/bin/true"] }

[[job]]
name = "editable"
handler = "command"
schedule = "30 2 * * *"
timezone = "America/New_York"
config = { argv = ["/bin/true"] }
`;

// Starts `taskengine <args> serve` in `cwd` on an ephemeral port; resolves
// {child, url} once it listens (rejects with its output if it exits first or
// does not listen within `timeoutMs`).
export async function startServe(args, cwd, timeoutMs = 20000) {
  const child = spawn(process.env.TASKENGINE_BIN, [...args, 'serve'],
                      {cwd, env: {...process.env, TASKENGINE_HTTP_PORT: '0'},
                       stdio: ['ignore', 'pipe', 'pipe']});
  let log = '';
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('serve did not start:\n' + log)), timeoutMs);
    const onData = (chunk) => {
      log += chunk;
      const m = /listening on (http:\/\/127\.0\.0\.1:[0-9]+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('exit', (code) => reject(new Error(`serve exited ${code}:\n${log}`)));
  });
  return {child, url};
}

export class Server {
  constructor() {
    this.dir = mkdtempSync(path.join(tmpdir(), 'te-browser-'));
    this.config = path.join(this.dir, 'taskengine.toml');
    this.db = path.join(this.dir, 'te.db');
    writeFileSync(this.config, CONFIG);
    this.child = null;
    this.workers = [];
    this.url = null;
    this.token = null;
  }

  // Runs `taskengine <args>`; throws on a non-zero exit.
  te(args, input) {
    const r = spawnSync(process.env.TASKENGINE_BIN, ['--config', this.config, '--db', this.db, ...args],
                        {input: input ?? '', encoding: 'utf8', cwd: this.dir});
    if (r.status !== 0) throw new Error(`taskengine ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
    return r.stdout;
  }

  async start() {
    this.te(['migrate']);
    this.te(['tenant:add', 'a']);
    this.te(['tenant:add', 'b']);
    this.te(['user:add', 'admin', '--role=admin', '--password-stdin'], PASSWORDS.admin + '\n');
    this.te(['user:add', 'alice', '--role=operator', '--tenant=a', '--password-stdin'],
            PASSWORDS.alice + '\n');
    this.te(['user:add', 'victor', '--role=viewer', '--password-stdin'], PASSWORDS.victor + '\n');
    this.token = JSON.parse(this.te(['token:create', '--name', 'tests', '--scopes=admin', '--json'])).secret;
    ({child: this.child, url: this.url} =
      await startServe(['--config', this.config, '--db', this.db], this.dir));
    return this;
  }

  // The REST API with the admin bearer token: {status, body}.
  async api(method, apiPath, body) {
    const r = await fetch(this.url + '/api/v1' + apiPath, {
      method,
      headers: {Authorization: 'Bearer ' + this.token, 'Content-Type': 'application/json'},
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    return {status: r.status, body: text ? JSON.parse(text) : null};
  }

  async dispatch(job, body = {}) {
    const r = await this.api('POST', '/jobs/' + job + '/dispatch', body);
    if (r.status !== 202) throw new Error('dispatch ' + job + ': ' + JSON.stringify(r));
    return r.body.id;
  }

  async waitFor(id, statuses, ms = 20000) {
    const deadline = Date.now() + ms;
    for (;;) {
      const r = await this.api('GET', '/executions/' + id);
      if (statuses.includes(r.body.status)) return r.body;
      if (Date.now() > deadline) throw new Error(`execution ${id} is ${r.body.status}, not ${statuses}`);
      await new Promise((res) => setTimeout(res, 100));
    }
  }

  // Starts a remote worker (`taskengine worker:start`) on the queue "remote",
  // which no job uses: it stays idle. Returns its name.
  startRemoteWorker(name) {
    const token = JSON.parse(this.te(['token:create', '--name', name, '--scopes=worker', '--json'])).secret;
    const child = spawn(process.env.TASKENGINE_BIN,
                        ['worker:start', '--server', this.url, '--token', token, '--queues', 'remote',
                         '--concurrency', '2', '--name', name, '--poll-ms', '1000'],
                        {cwd: this.dir, stdio: ['ignore', 'ignore', 'pipe']});
    child.stderr.on('data', () => {});
    this.workers.push(child);
    return name;
  }

  async stop() {
    for (const child of this.workers) {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((res) => child.once('exit', res));
        child.kill('SIGTERM');
        await exited;
      }
    }
    if (this.child && this.child.exitCode === null) {
      const exited = new Promise((res) => this.child.once('exit', res));
      this.child.kill('SIGTERM');
      await exited;
    }
    rmSync(this.dir, {recursive: true, force: true});
  }
}

export async function launchBrowser() {
  const require = createRequire(import.meta.url);
  const {chromium} = require('playwright-core');
  return chromium.launch({executablePath: CHROMIUM, args: ['--no-sandbox']});
}

// A new page whose dialogs (alert, confirm) are recorded, never answered silently.
export async function newPage(browser, server) {
  const context = await browser.newContext({baseURL: server.url});
  const page = await context.newPage();
  page.dialogs = [];
  page.on('dialog', (d) => {
    page.dialogs.push(d.message());
    d.dismiss().catch(() => {});
  });
  page.pageErrors = [];
  page.on('pageerror', (e) => page.pageErrors.push(e.message));
  return page;
}

export async function logIn(page, user) {
  await page.goto('/login');
  await page.fill('#username', user);
  await page.fill('#password', PASSWORDS[user]);
  await Promise.all([page.waitForURL(/\/admin\//), page.click('button[type=submit]')]);
}

// With TASKENGINE_SCREENSHOTS=<dir>, saves the page as <dir>/<name>.png (the
// pictures of docs/dashboard.md); otherwise does nothing.
export async function screenshot(page, name) {
  const dir = process.env.TASKENGINE_SCREENSHOTS;
  if (!dir) return;
  await page.setViewportSize({width: 1280, height: 800});
  await page.screenshot({path: path.join(dir, name + '.png'), fullPage: true});
}

let axeSource = null;

// axe-core's serious and critical violations on the current page.
export async function axeViolations(page) {
  // Evaluated through the DevTools protocol: the page's CSP forbids inline
  // scripts, and the test must not loosen it.
  const require = createRequire(import.meta.url);
  if (!axeSource) axeSource = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
  await page.evaluate(axeSource);
  const result = await page.evaluate(async () => window.axe.run(document, {resultTypes: ['violations']}));
  return result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}
