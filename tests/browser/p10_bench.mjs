// P10 (quality.md §1): the dashboard's overview and executions pages in
// Chromium with millions of executions stored. Not a test: bench/p10.sh runs
// it on a database that `taskengine-bench fill` wrote, and it prints figures.
//
// Environment: TASKENGINE_BIN (the binary), P10_DB (the filled database; it
// gains a user and the jobs' current definitions), P10_RUNS (navigations per
// page, default 9).
//
// A navigation is timed from page.goto() to the first element that shows
// the page's data: the overview's "Succeeded (24 h)" figure, the executions
// table's first row. Each page is opened once before the timed runs.
import {spawnSync} from 'node:child_process';
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs';
import {tmpdir} from 'node:os';
import path from 'node:path';

import {launchBrowser, newPage, startServe} from './harness.mjs';

const bin = process.env.TASKENGINE_BIN;
const db = process.env.P10_DB;
const runs = Number(process.env.P10_RUNS || 9);
if (!bin || !db) {
  console.error('p10_bench: set TASKENGINE_BIN and P10_DB (bench/p10.sh does)');
  process.exit(2);
}

const dir = mkdtempSync(path.join(tmpdir(), 'te-p10-'));
const config = path.join(dir, 'taskengine.toml');
// The jobs of `taskengine-bench fill`; nothing due runs in the measured minute.
writeFileSync(config, `
[engine]
worker_threads = 1

[http]
login_per_minute = 120

[[job]]
name = "report"
handler = "command"
max_attempts = 1
config = { argv = ["/bin/true"] }

[[job]]
name = "sync"
handler = "command"
scope = "per_tenant"
max_attempts = 1
config = { argv = ["/bin/true"] }
`);

const password = 'p10-password-12345';
function te(args, input) {
  return spawnSync(bin, ['--config', config, '--db', db, ...args],
                   {input: input ?? '', encoding: 'utf8', cwd: dir});
}
te(['migrate']);
const added = te(['user:add', 'p10', '--role=admin', '--password-stdin'], password + '\n');
if (added.status !== 0 && !/exists/.test(added.stderr)) {
  console.error('user:add: ' + added.stderr);
  process.exit(1);
}

// Opening 5,000,000 executions takes longer than an empty database.
const {child: serve, url} = await startServe(['--config', config, '--db', db], dir, 120000);

const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
let browser = null;
try {
  browser = await launchBrowser();
  const page = await newPage(browser, {url});
  await page.goto('/login');
  await page.fill('#username', 'p10');
  await page.fill('#password', password);
  await Promise.all([page.waitForURL(/\/admin\//), page.click('button[type=submit]')]);

  const stats = await page.evaluate(async () => (await fetch('/api/v1/stats')).json());
  const stored = Object.values(stats.by_status || {}).reduce((a, b) => a + b, 0);
  console.log(`P10 database: ${db}; executions stored (GET /api/v1/stats): ${stored || 'n/a'}`);

  const pages = [
    {name: 'overview', path: '/admin/tasks/', shown: '[data-figure="succeeded_24h"] .card-value'},
    {name: 'executions', path: '/admin/tasks/executions', shown: 'main table tbody tr'},
    {name: 'executions?status=failed', path: '/admin/tasks/executions?status=failed',
     shown: 'main table tbody tr'},
    {name: 'executions?job=sync', path: '/admin/tasks/executions?job=sync',
     shown: 'main table tbody tr'},
  ];
  const results = [];
  for (const p of pages) {
    const times = [];
    for (let i = 0; i <= runs; ++i) {
      const t0 = performance.now();
      await page.goto(p.path, {waitUntil: 'commit'});
      await page.waitForSelector(p.shown, {timeout: 30000});
      if (i > 0) times.push(performance.now() - t0);  // the first opens the page once
    }
    results.push({...p, times});
  }
  for (const r of results) {
    const m = median(r.times);
    console.log(`P10 ${r.name.padEnd(26)} data shown after navigation: median ${m.toFixed(0)} ms, ` +
                `min ${Math.min(...r.times).toFixed(0)}, max ${Math.max(...r.times).toFixed(0)} ` +
                `(${r.times.length} runs; target <= 300 ms, ratio ${(m / 300).toFixed(2)})`);
    // The machine-readable line of bench/run.sh (bench/bench_support.h PrintFigure).
    const f = (v) => v.toFixed(4);
    console.log(`@figure|P10|${r.name} page: data shown after navigation|${f(m)}|` +
                `${f(Math.min(...r.times))}|${f(Math.max(...r.times))}|${r.times.length}|ms|<=|300`);
  }
} finally {
  if (browser) await browser.close();
  serve.kill('SIGTERM');
  await new Promise((res) => serve.once('exit', res));
  rmSync(dir, {recursive: true, force: true});
}
