// The dashboard in a real browser (Debian chromium via playwright-core)
// against a real `taskengine serve`: login, the overview's figures against
// GET /api/v1/stats, run now from the Jobs page, cancel, replay from the
// quarantine, the Lanes, Workers, Audit log, Tenants, Users and Tokens pages
// against their API routes, hostile text shown as text, CSRF, tenant isolation, 401
// without a session, and axe-core on every page. Run by ctest (label
// browser); see docs/dashboard.md.
import assert from 'node:assert/strict';
import {after, before, describe, test} from 'node:test';

import {axeViolations, launchBrowser, logIn, newPage, PASSWORDS, requirements, screenshot, Server, XSS}
  from './harness.mjs';

const T = {timeout: 60000};
let server;
let browser;

before(async () => {
  requirements();
  server = await new Server().start();
  browser = await launchBrowser();
});

after(async () => {
  if (browser) await browser.close();
  if (server) await server.stop();
});

async function figure(page, name) {
  return (await page.locator(`[data-figure="${name}"] .card-value`).textContent()).trim();
}

describe('dashboard', () => {
  test('every page and asset without a session answers 401 with the login form', T, async () => {
    for (const target of ['/admin/tasks/', '/admin/tasks/executions', '/admin/tasks/executions/1',
                          '/admin/tasks/jobs', '/admin/tasks/quarantine', '/admin/a/tasks/',
                          '/admin/tasks/lanes', '/admin/tasks/workers', '/admin/tasks/audit',
                          '/admin/tasks/tenants', '/admin/tasks/users', '/admin/tasks/tokens',
                          '/admin/assets/accounts.js', '/admin/assets/lanes.js', '/admin/assets/app.js', '/admin/assets/app.css', '/admin/assets/api.js']) {
      const r = await fetch(server.url + target, {redirect: 'manual'});
      assert.equal(r.status, 401, target);
      assert.match(await r.text(), /<form method="post" action="\/login">/, target);
    }
    const root = await fetch(server.url + '/', {redirect: 'manual'});
    assert.equal(root.status, 302);
    assert.equal(root.headers.get('location'), '/login');
    const page = await newPage(browser, server);
    const response = await page.goto('/admin/tasks/jobs');
    assert.equal(response.status(), 401);
    assert.equal(await page.locator('h1').textContent(), 'taskengine');
    assert.equal(await page.inputValue('input[name=next]'), '/admin/tasks/jobs');
    assert.deepEqual(await axeViolations(page), []);
    await page.context().close();
  });

  test('login refuses a bad password and lands on the overview with a good one', T, async () => {
    const page = await newPage(browser, server);
    await page.goto('/login');
    await page.fill('#username', 'admin');
    await page.fill('#password', 'not-the-password');
    await page.click('button[type=submit]');
    assert.equal(await page.locator('#error').textContent(), 'invalid username or password');
    assert.match(page.url(), /\/login$/);
    await page.fill('#password', PASSWORDS.admin);
    await Promise.all([page.waitForURL(/\/admin\/tasks\/$/), page.click('button[type=submit]')]);
    await page.locator('h1', {hasText: 'Overview'}).waitFor();
    const cookies = await page.context().cookies();
    const session = cookies.find((c) => c.name === 'te_session');
    assert.ok(session && session.httpOnly && session.sameSite === 'Strict', JSON.stringify(cookies));
    // Logging out ends the session: the pages answer 401 again.
    await Promise.all([page.waitForURL(/\/login$/), page.click('#logout')]);
    const again = await page.goto('/admin/tasks/');
    assert.equal(again.status(), 401);
    await page.context().close();
  });

  test('run now from the Jobs page with a payload, watched to succeeded without a reload', T, async () => {
    const page = await newPage(browser, server);
    await logIn(page, 'admin');
    await page.click('nav a[data-page=jobs]');
    await page.locator('h1', {hasText: 'Jobs'}).waitFor();
    await page.locator('td', {hasText: '0 3 * * *'}).waitFor();  // the schedule of "nightly"
    await page.selectOption('#run-job', 'hello');
    await page.fill('#run-payload', '{"n": ');
    assert.match(await page.locator('#run-payload-check').textContent(), /not JSON/);
    assert.equal(await page.locator('.run-form button[type=submit]').isDisabled(), true);
    await page.fill('#run-payload', '[1, 2]');
    assert.match(await page.locator('#run-payload-check').textContent(), /must be a JSON object/);
    await page.fill('#run-payload', '{"n": 7, "who": "browser"}');
    assert.equal(await page.locator('.run-form button[type=submit]').isDisabled(), false);
    const navigations = [];
    page.on('framenavigated', (f) => navigations.push(f.url()));
    await page.click('.run-form button[type=submit]');
    const status = page.locator('.action-status');
    await page.waitForFunction(() => document.querySelector('.action-status').dataset.state === 'confirmed',
                               null, {timeout: 30000});
    const text = await status.textContent();
    assert.match(text, /execution #([0-9]+) is succeeded/);
    assert.deepEqual(navigations, [], 'no reload');
    const id = /#([0-9]+)/.exec(text)[1];
    const e = await server.api('GET', '/executions/' + id);
    assert.equal(e.body.status, 'succeeded');
    assert.deepEqual(e.body.payload, {n: 7, who: 'browser'});
    assert.equal(e.body.requester, 'admin');
    assert.deepEqual(await axeViolations(page), []);
    await page.context().close();
  });

  test('edit a job: live fire preview, a refused zone changes nothing, then saved and confirmed', T, async () => {
    const page = await newPage(browser, server);
    await logIn(page, 'admin');
    await page.click('nav a[data-page=jobs]');
    await page.locator('h1', {hasText: 'Jobs'}).waitFor();
    // Disabling needs a reason: without one nothing is sent.
    await page.click('button[aria-label="Disable editable"]');
    await page.locator('p.hint', {hasText: 'Give a reason to disable editable'}).waitFor();
    assert.equal((await server.api('GET', '/jobs/editable')).body.enabled, true);
    await page.click('button[aria-label="Edit editable"]');
    const form = page.locator('#job-edit');
    await form.waitFor();
    // The preview is what the API computes for the job's schedule and zone.
    const expected = (await server.api('GET', '/schedule/preview?schedule=' +
      encodeURIComponent('30 2 * * *') + '&timezone=America/New_York&count=5')).body;
    assert.equal(expected.fires.length, 5);
    await eventually(async () => {
      const items = await page.locator('#edit-preview li').allTextContents();
      assert.equal(items.length, 5);
      items.forEach((text, i) => assert.ok(text.startsWith(expected.fires[i].local + ' ' + expected.fires[i].abbrev), text));
    });
    // An unknown zone: the preview says so, and the save is refused; nothing changes.
    await page.fill('#edit-timezone', 'Mars/Olympus');
    await page.locator('#edit-preview .error-text').waitFor();
    assert.match(await page.locator('#edit-preview').textContent(), /Mars\/Olympus/);
    await page.fill('#edit-reason', 'try a bad zone');
    await page.click('#job-edit button[type=submit]');
    await page.waitForFunction(() => document.querySelector('.action-status').dataset.state === 'refused');
    assert.match(await page.locator('.action-status').textContent(), /time zone/);
    const before = (await server.api('GET', '/jobs/editable')).body;
    assert.equal(before.timezone, 'America/New_York');
    // A good edit: schedule, zone and notify targets, accepted then confirmed.
    await page.fill('#edit-schedule', '*/15 * * * *');
    await page.fill('#edit-timezone', 'Europe/Berlin');
    await eventually(async () => {
      assert.equal(await page.locator('#edit-preview li').count(), 5);
      assert.match(await page.locator('#edit-preview li').first().textContent(), /CES?T/);
    });
    await page.fill('#edit-targets', 'ops@example.com\n\nwebhook:nope-not-configured');
    await page.fill('#edit-reason', 'move to Berlin');
    await page.click('#job-edit button[type=submit]');
    await page.waitForFunction(() => document.querySelector('.action-status').dataset.state === 'refused');
    assert.match(await page.locator('.action-status').textContent(), /notify_targets/);
    await page.fill('#edit-targets', 'ops@example.com');
    await page.click('#job-edit button[type=submit]');
    await page.waitForFunction(() => document.querySelector('.action-status').dataset.state === 'confirmed',
                               null, {timeout: 30000});
    const after = (await server.api('GET', '/jobs/editable')).body;
    assert.equal(after.schedule, '*/15 * * * *');
    assert.equal(after.timezone, 'Europe/Berlin');
    assert.deepEqual(after.notify_targets, ['ops@example.com']);
    assert.equal(after.notify_on_failure, true);
    const audit = (await server.api('GET', '/audit?target=job:editable')).body.items;
    assert.equal(audit[0].action, 'job.update');
    assert.equal(audit[0].reason, 'move to Berlin');
    assert.deepEqual(await axeViolations(page), []);
    await page.context().close();
  });

  test('cancel a running execution from its page', T, async () => {
    const id = await server.dispatch('sleepy');
    await server.waitFor(id, ['running']);
    const page = await newPage(browser, server);
    await logIn(page, 'admin');
    await page.goto('/admin/tasks/executions/' + id);
    await page.locator('button', {hasText: 'Cancel execution'}).waitFor();
    await page.fill('#cancel-reason', 'browser test');
    await page.click('button:has-text("Cancel execution")');
    await page.waitForFunction(() => document.querySelector('.action-status').dataset.state === 'confirmed',
                               null, {timeout: 30000});
    assert.match(await page.locator('.action-status').textContent(), /the execution is canceled/);
    assert.equal((await server.api('GET', '/executions/' + id)).body.status, 'canceled');
    await page.locator('td', {hasText: 'execution.cancel'}).first().waitFor();
    await page.context().close();
  });

  test('hostile error and log text is shown as text and runs no script', T, async () => {
    const id = await server.dispatch('hostile');
    await server.waitFor(id, ['quarantined', 'failed']);
    const page = await newPage(browser, server);
    await logIn(page, 'admin');
    await page.goto('/admin/tasks/executions/' + id);
    await page.locator('#execution-error').waitFor();
    assert.match(await page.locator('#execution-error').textContent(), /<img src=x onerror=alert\(1\)>/);
    const logs = await page.locator('#execution-logs').textContent();
    assert.ok(logs.includes(XSS), logs);
    await page.goto('/admin/tasks/executions?job=hostile');
    await page.locator('td', {hasText: XSS}).first().waitFor();
    await page.waitForTimeout(500);
    assert.equal(await page.locator('main img').count(), 0);
    assert.deepEqual(page.dialogs, []);
    assert.deepEqual(page.pageErrors, []);
    await page.context().close();
  });

  test('replay a quarantined execution with a reason and see the audit row', T, async () => {
    const id = await server.dispatch('hostile');
    await server.waitFor(id, ['quarantined']);
    const page = await newPage(browser, server);
    await logIn(page, 'admin');
    await page.click('nav a[data-page=quarantine]');
    const form = page.locator(`form[aria-label="Replay execution ${id}"]`);
    await form.waitFor();
    await form.locator('button').click();
    assert.match(await page.locator('.action-status').textContent(), /needs a reason/);
    await form.locator('input[name=reason]').fill('payload fixed upstream');
    await form.locator('button').click();
    await page.waitForFunction(() => document.querySelector('.action-status').dataset.state === 'confirmed',
                               null, {timeout: 30000});
    await page.goto('/admin/tasks/executions/' + id);
    await page.locator('td', {hasText: 'payload fixed upstream'}).waitFor();
    assert.deepEqual(await axeViolations(page), []);
    await page.context().close();
  });

  test('a mutation without the CSRF token is refused', T, async () => {
    const page = await newPage(browser, server);
    await logIn(page, 'admin');
    const refused = await page.evaluate(async () => {
      const r = await fetch('/api/v1/jobs/nightly/disable', {method: 'POST', body: '{}',
                                                             headers: {'Content-Type': 'application/json'}});
      return {status: r.status, body: await r.json()};
    });
    assert.equal(refused.status, 403);
    assert.equal(refused.body.error.details.reason, 'csrf');
    assert.equal((await server.api('GET', '/jobs/nightly')).body.enabled, true, 'nothing changed');
    await page.context().close();
  });

  test('a tenant user sees only its tenant', T, async () => {
    const mine = await server.dispatch('per-store', {tenant: 'a'});
    const theirs = await server.dispatch('per-store', {tenant: 'b'});
    await server.waitFor(mine, ['succeeded']);
    await server.waitFor(theirs, ['succeeded']);
    const page = await newPage(browser, server);
    await logIn(page, 'alice');
    assert.match(page.url(), /\/admin\/a\/tasks\/$/);
    await page.click('nav a[data-page=executions]');
    await page.locator(`a[href="/admin/a/tasks/executions/${mine}"]`).waitFor();
    assert.equal(await page.locator(`a[href$="/executions/${theirs}"]`).count(), 0);
    await page.goto('/admin/a/tasks/executions/' + theirs);
    await page.locator('h1', {hasText: 'Not found'}).waitFor();
    for (const target of ['/admin/b/tasks/', '/admin/tasks/', '/admin/zz/tasks/']) {
      const r = await page.goto(target);
      assert.equal(r.status(), 404, target);
      assert.equal(await page.locator('h1').textContent(), 'Not found');
    }
    const apiRead = await page.evaluate(async (id) => (await fetch('/api/v1/executions/' + id)).status, theirs);
    assert.equal(apiRead, 404);
    await page.context().close();
  });

  test('overview figures equal GET /api/v1/stats, and every page passes axe', T, async () => {
    const page = await newPage(browser, server);
    await logIn(page, 'admin');
    const stats = (await server.api('GET', '/stats')).body;
    assert.equal(stats.running, 0, 'nothing runs now');
    await page.goto('/admin/tasks/');
    await page.locator('[data-figure=queued]').waitFor();
    assert.equal(await figure(page, 'active_workers'), String(stats.active_workers));
    assert.equal(await figure(page, 'queued'), String(stats.queued));
    assert.equal(await figure(page, 'running'), String(stats.running));
    assert.equal(await figure(page, 'failed_24h'), String(stats.last_24h.failed));
    assert.equal(await figure(page, 'quarantined_24h'), String(stats.last_24h.quarantined));
    assert.equal(await figure(page, 'succeeded_24h'), String(stats.last_24h.succeeded));
    assert.ok(stats.last_24h.succeeded >= 3);
    const tenantRow = page.locator('tr', {has: page.locator('a[href="/admin/a/tasks/"]')});
    const a = stats.tenants.find((t) => t.tenant === 'a');
    assert.equal((await tenantRow.locator('td').nth(3).textContent()).trim(), String(a.succeeded_24h));
    assert.equal(await page.locator('main svg[role=img]').count(), 2);
    for (const target of ['/admin/tasks/', '/admin/tasks/executions', '/admin/tasks/jobs',
                          '/admin/tasks/quarantine', '/admin/tasks/executions/1', '/admin/a/tasks/',
                          '/admin/tasks/nowhere']) {
      await page.goto(target);
      await page.locator('main h1').waitFor();
      await page.waitForLoadState('networkidle');
      assert.deepEqual(await axeViolations(page), [], target);
      const shots = {'/admin/tasks/': 'overview', '/admin/tasks/executions': 'executions',
                     '/admin/tasks/jobs': 'jobs', '/admin/tasks/quarantine': 'quarantine',
                     '/admin/tasks/executions/1': 'execution'};
      if (shots[target]) await screenshot(page, shots[target]);
    }
    assert.deepEqual(page.pageErrors, []);
    await page.context().close();
  });
});

// --- Lanes, Workers, Audit log, Tenants ----------------------------------------------------------

// Retries `check` (which throws on a mismatch) for up to `ms`: the page reads
// the API again every 5 s, so a comparison may catch it between two reads.
async function eventually(check, ms = 15000) {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      return await check();
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await new Promise((res) => setTimeout(res, 250));
    }
  }
}

// The cells of every row of the page's table, as text.
async function rows(page) {
  return page.locator('main table tbody tr').evaluateAll((trs) =>
    trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent.trim())));
}

// The API as the page's user (session cookie; CSRF token on mutations).
async function asUser(page, method, apiPath, body) {
  return page.evaluate(async ({method, apiPath, body}) => {
    const headers = {'Content-Type': 'application/json'};
    if (method !== 'GET') {
      headers['X-CSRF-Token'] = (await (await fetch('/api/v1/auth/session')).json()).csrf_token;
    }
    const r = await fetch('/api/v1' + apiPath, {method, headers,
                                               body: body === undefined ? undefined : JSON.stringify(body)});
    return {status: r.status, body: await r.json()};
  }, {method, apiPath, body});
}

async function navPages(page) {
  await page.locator('#nav a').first().waitFor();
  return page.locator('#nav a').evaluateAll((as) => as.map((a) => a.dataset.page));
}

// Records the states the page's action status shows from now on. The page
// may render its status element again (a refresh) while an action runs, so
// every .action-status element is watched, not the one there now.
async function watchActionStates(page) {
  await page.evaluate(() => {
    window.actionStates = [];
    if (window.actionObserver) window.actionObserver.disconnect();
    window.actionObserver = new MutationObserver((records) => {
      const states = window.actionStates;
      for (const r of records) {
        if (!r.target.classList || !r.target.classList.contains('action-status')) continue;
        const state = r.target.dataset.state;
        if (state && states[states.length - 1] !== state) states.push(state);
      }
    });
    window.actionObserver.observe(document.body,
                                  {subtree: true, attributes: true, attributeFilter: ['data-state']});
  });
}

// The states recorded once the action was confirmed (not merely once the
// status shows "confirmed", which it may still show from the last action).
async function confirmedStates(page) {
  await page.waitForFunction(() => window.actionStates.includes('confirmed'), null, {timeout: 30000});
  return page.evaluate(() => window.actionStates);
}

function laneCells(lane, global) {
  const cells = [lane.lane, lane.blocked ? 'blocked' : 'flowing',
                 lane.head === null ? '—' : '#' + lane.head, String(lane.queued), String(lane.running)];
  return global ? [lane.tenant === null ? '(global jobs)' : lane.tenant, ...cells] : cells;
}

// The page's lane rows as the fields laneCells compares.
function pageLaneCells(row, global) {
  const at = global ? 1 : 0;
  return [...(global ? [row[0]] : []), row[at], row[at + 1], row[at + 2].split(' ')[0],
          row[at + 4], row[at + 5]];
}

describe('dashboard: lanes, workers, audit log, tenants', () => {
  const blocked = {};  // lane key -> the id of its blocking head

  before(async () => {
    // A global lane whose key is hostile text, blocked by a quarantined head
    // with a member waiting behind it; one blocked lane in each of tenants a and b.
    blocked.hostile = await server.dispatch('hostile', {lane: XSS});
    await server.waitFor(blocked.hostile, ['quarantined', 'failed']);
    blocked.waiting = await server.dispatch('hostile', {lane: XSS});
    blocked.a = await server.dispatch('store-fail', {tenant: 'a', lane: 'orders-a'});
    blocked.b = await server.dispatch('store-fail', {tenant: 'b', lane: 'orders-b'});
    await server.waitFor(blocked.a, ['failed', 'quarantined']);
    await server.waitFor(blocked.b, ['failed', 'quarantined']);
  });

  test('lanes: blocked lanes first with the blocking execution linked, exactly the API\'s lanes', T, async () => {
    const flowing = await server.dispatch('sleepy', {lane: 'slow-lane'});
    await server.waitFor(flowing, ['running']);
    const page = await newPage(browser, server);
    try {
      await logIn(page, 'admin');
      await page.click('nav a[data-page=lanes]');
      await page.locator('h1', {hasText: 'Lanes'}).waitFor();
      const lanes = await eventually(async () => {
        const api = (await server.api('GET', '/lanes?limit=200')).body.items;
        assert.ok(api.some((l) => l.lane === 'slow-lane'), 'the flowing lane is listed');
        assert.deepEqual((await rows(page)).map((r) => pageLaneCells(r, true)), api.map((l) => laneCells(l, true)));
        return api;
      });
      // Blocked first: every blocked lane comes before every flowing one.
      assert.equal(lanes[0].blocked, true);
      const firstFlowing = lanes.findIndex((l) => !l.blocked);
      assert.ok(firstFlowing > 0 && lanes.slice(firstFlowing).every((l) => !l.blocked), JSON.stringify(lanes));
      const first = (await rows(page))[0];
      assert.equal(first[2], 'blocked');
      // The hostile lane: shown as text, its head linked, why it blocks, its error.
      const row = page.locator('main tbody tr', {has: page.locator('code.lane-key', {hasText: XSS})});
      assert.equal(await row.count(), 1);
      assert.equal(await row.locator('code.lane-key').textContent(), XSS);
      const head = row.locator(`a[href="/admin/tasks/executions/${blocked.hostile}"]`);
      assert.equal(await head.textContent(), '#' + blocked.hostile);
      const why = await row.locator('td').nth(4).textContent();
      assert.match(why, /its head (is quarantined|failed): the later members wait until an operator replays or cancels it/);
      const lane = lanes.find((l) => l.lane === XSS);
      assert.equal(lane.head, Number(blocked.hostile));
      assert.equal(lane.queued, 1, 'one member waits behind the head');
      await head.click();
      await page.locator('h1', {hasText: 'Execution #' + blocked.hostile}).waitFor();
      await page.goBack();
      await page.locator('#lanes-summary').waitFor();
      assert.equal(await page.locator('main img').count(), 0);
      assert.deepEqual(page.dialogs, []);
      assert.deepEqual(await axeViolations(page), []);
      await screenshot(page, 'lanes');
      // A tenant's view lists that tenant's lanes only.
      await page.goto('/admin/a/tasks/lanes');
      await eventually(async () => {
        const api = (await server.api('GET', '/lanes?tenant=a&limit=200')).body.items;
        assert.deepEqual(api.map((l) => l.lane), ['orders-a']);
        assert.deepEqual((await rows(page)).map((r) => pageLaneCells(r, false)), api.map((l) => laneCells(l, false)));
      });
      assert.equal(await page.locator(`a[href="/admin/a/tasks/executions/${blocked.a}"]`).count(), 1);
      assert.deepEqual(page.pageErrors, []);
    } finally {
      await page.context().close();
      await server.api('POST', '/executions/' + flowing + '/cancel', {reason: 'lanes test done'});
      await server.waitFor(flowing, ['canceled']);
    }
  });

  test('workers: the serve pool and a remote worker with their state, exactly the API\'s workers', T, async () => {
    const name = server.startRemoteWorker('browser-remote');
    const remote = await eventually(async () => {
      const w = (await server.api('GET', '/workers')).body.items.find((i) => i.name === name);
      assert.ok(w && w.state === 'idle', JSON.stringify(w));
      return w;
    }, 20000);
    const page = await newPage(browser, server);
    await logIn(page, 'admin');
    await page.click('nav a[data-page=workers]');
    await page.locator('#workers-summary').waitFor();
    const cellsOf = (w) => [w.kind, w.state, w.host ?? '—', w.pid === null ? '—' : String(w.pid),
                            w.concurrency === null ? '—' : String(w.concurrency), String(w.busy),
                            String(w.processed), String(w.failed)];
    await eventually(async () => {
      const api = (await server.api('GET', '/workers')).body.items;
      const shown = await rows(page);
      assert.equal(shown.length, api.length);
      for (const w of api) {
        const row = shown.find((r) => r[0] === w.id + (w.name ? w.name : ''));
        assert.ok(row, 'a row for ' + w.id);
        assert.deepEqual(row.slice(1, 9), cellsOf(w), w.id);
      }
    });
    const pool = (await server.api('GET', '/workers')).body.items.find((w) => w.kind === 'pool' &&
                                                                            w.state !== 'stopped');
    assert.ok(pool && ['idle', 'busy'].includes(pool.state), JSON.stringify(pool));
    assert.equal(pool.concurrency, 3);
    const remoteRow = page.locator('main tbody tr', {has: page.locator('code', {hasText: remote.id})});
    assert.equal(await remoteRow.locator('td').nth(1).textContent(), 'remote');
    assert.equal(await remoteRow.locator('td').nth(2).textContent(), 'idle');
    assert.equal(await remoteRow.locator('td').nth(5).textContent(), '2');
    assert.deepEqual(await axeViolations(page), []);
    assert.deepEqual(page.pageErrors, []);
    await page.context().close();
  });

  test('audit log: newest first, before/after as text, the target filter narrows, pages', T, async () => {
    // More than a page of records, then the action of this test on top.
    for (let i = 0; i < 55; ++i) {
      assert.equal((await server.api('POST', '/tenants', {id: 'b', reason: 'audit page ' + i})).status, 200);
    }
    const disabled = await server.api('POST', '/jobs/audited/disable', {reason: XSS});
    assert.equal(disabled.status, 200);
    const page = await newPage(browser, server);
    try {
      await logIn(page, 'admin');
      await page.click('nav a[data-page=audit]');
      await page.locator('h1', {hasText: 'Audit log'}).waitFor();
      const cellsOf = (a) => [a.actor, a.tenant ?? '—', a.action, a.reason ?? '',
                              a.before === null ? '—' : JSON.stringify(a.before),
                              a.after === null ? '—' : JSON.stringify(a.after)];
      const pageCells = (r) => [r[1], r[2], r[3], r[5], r[6], r[7]];
      const all = await eventually(async () => {
        const api = (await server.api('GET', '/audit?limit=50')).body;
        assert.deepEqual((await rows(page)).map(pageCells), api.items.map(cellsOf));
        return api;
      });
      const top = (await rows(page))[0];
      assert.deepEqual([top[3], top[4], top[5], top[6], top[7]],
                       ['job.disable', 'job:audited', XSS, '{"enabled":true}', '{"enabled":false}']);
      assert.equal(await page.locator('main tbody tr').first().locator('.audit-reason').textContent(), XSS);
      assert.equal(await page.locator('main img').count(), 0);
      // Older: the next page is the API's next page.
      assert.ok(all.next_cursor, 'more than one page');
      await page.click('a:has-text("Older →")');
      await page.waitForURL(/cursor=/);
      await eventually(async () => {
        const next = (await server.api('GET', '/audit?limit=50&cursor=' + all.next_cursor)).body;
        assert.deepEqual((await rows(page)).map(pageCells), next.items.map(cellsOf));
      });
      await page.click('a:has-text("← Newest")');
      await page.waitForURL((u) => !u.search.includes('cursor'));
      // The target filter narrows to that target's records.
      await page.fill('#f-target', 'job:audited');
      await page.click('form[role=search] button[type=submit]');
      await page.waitForURL(/target=job%3Aaudited/);
      await eventually(async () => {
        const api = (await server.api('GET', '/audit?target=job%3Aaudited&limit=50')).body.items;
        assert.ok(api.length >= 1);
        const shown = await rows(page);
        assert.deepEqual(shown.map(pageCells), api.map(cellsOf));
        assert.ok(shown.every((r) => r[4] === 'job:audited'), JSON.stringify(shown));
      });
      // A new action shows up at the top without a reload.
      assert.equal((await server.api('POST', '/jobs/audited/enable', {reason: 'back on'})).status, 200);
      await page.locator('main tbody tr').first().locator('td', {hasText: 'job.enable'}).waitFor({timeout: 15000});
      assert.deepEqual(page.dialogs, []);
      assert.deepEqual(await axeViolations(page), []);
      assert.deepEqual(page.pageErrors, []);
    } finally {
      await page.context().close();
      await server.api('POST', '/jobs/audited/enable', {reason: 'audit test done'});
    }
  });

  test('tenants: an admin adds a tenant and disables it, accepted then confirmed', T, async () => {
    const page = await newPage(browser, server);
    await logIn(page, 'admin');
    await page.click('nav a[data-page=tenants]');
    await page.locator('#tenants-h').waitFor();
    const cellsOf = (t) => [t.id, t.name || '—', t.active ? 'yes' : 'disabled'];
    await eventually(async () => {
      const api = (await server.api('GET', '/tenants')).body.items;
      assert.deepEqual((await rows(page)).map((r) => r.slice(0, 3)), api.map(cellsOf));
    });
    // Bad input: a clear message, nothing sent.
    await page.fill('#tenant-id', 'Not A Tenant!');
    await page.click('button:has-text("Add tenant")');
    assert.match(await page.locator('.action-status').textContent(), /must match/);
    await page.fill('#tenant-id', 'b');
    await page.click('button:has-text("Add tenant")');
    await page.locator('.action-status', {hasText: 'Tenant b already exists.'}).waitFor();
    // Add.
    await watchActionStates(page);
    await page.fill('#tenant-id', 'c-shop');
    await page.fill('#tenant-name', 'C Shop');
    await page.fill('#tenant-add-reason', 'new customer');
    await page.click('button:has-text("Add tenant")');
    assert.deepEqual(await confirmedStates(page), ['sending', 'accepted', 'confirmed']);
    assert.match(await page.locator('.action-status').textContent(), /tenant c-shop exists and is active/);
    const added = (await server.api('GET', '/tenants/c-shop')).body;
    assert.deepEqual([added.name, added.active], ['C Shop', true]);
    const row = page.locator('main tbody tr', {has: page.locator('a[href="/admin/c-shop/tasks/"]')});
    await row.waitFor();
    // Disable, with a reason for the audit log.
    await watchActionStates(page);
    await page.fill('#tenant-reason', 'shop closed');
    await row.locator('button[aria-label="Disable tenant c-shop"]').click();
    assert.deepEqual(await confirmedStates(page), ['sending', 'accepted', 'confirmed']);
    assert.equal((await server.api('GET', '/tenants/c-shop')).body.active, false);
    await row.locator('td', {hasText: 'disabled'}).waitFor();
    const audit = (await server.api('GET', '/audit?target=tenant%3Ac-shop')).body.items;
    assert.deepEqual(audit.map((a) => [a.actor, a.action, a.reason]),
                     [['admin', 'tenant.update', 'shop closed'], ['admin', 'tenant.create', 'new customer']]);
    assert.deepEqual([audit[0].before.active, audit[0].after.active], [true, false]);
    assert.deepEqual(await axeViolations(page), []);
    assert.deepEqual(page.pageErrors, []);
    await page.context().close();
  });

  test('a non-admin sees no tenant controls and no audit log, and the API refuses them', T, async () => {
    const page = await newPage(browser, server);
    await logIn(page, 'victor');
    assert.match(page.url(), /\/admin\/tasks\/$/);
    assert.deepEqual(await navPages(page), ['', 'executions', 'jobs', 'quarantine', 'lanes', 'workers', 'tenants']);
    await page.click('nav a[data-page=tenants]');
    await page.locator('#tenants-h').waitFor();
    await page.locator('main tbody tr').first().waitFor();
    assert.equal(await page.locator('#tenant-id').count(), 0);
    assert.equal(await page.locator('main button').count(), 0);
    const refused = await asUser(page, 'POST', '/tenants', {id: 'victor-shop'});
    assert.equal(refused.status, 403);
    assert.equal((await server.api('GET', '/tenants/victor-shop')).status, 404, 'nothing changed');
    assert.equal((await asUser(page, 'POST', '/tenants', {id: 'b', active: false})).status, 403);
    assert.equal((await server.api('GET', '/tenants/b')).body.active, true);
    await page.goto('/admin/tasks/audit');
    await page.locator('h1', {hasText: 'Not found'}).waitFor();
    assert.equal((await asUser(page, 'GET', '/audit')).status, 403);
    await page.context().close();
  });

  test('a tenant user sees only its tenant\'s lanes, no audit log and no tenant controls', T, async () => {
    const page = await newPage(browser, server);
    await logIn(page, 'alice');
    assert.deepEqual(await navPages(page), ['', 'executions', 'jobs', 'quarantine', 'lanes', 'workers', 'tenants']);
    await page.click('nav a[data-page=lanes]');
    await page.locator('#lanes-summary').waitFor();
    await eventually(async () => {
      const mine = (await asUser(page, 'GET', '/lanes')).body.items;
      assert.deepEqual(mine.map((l) => [l.tenant, l.lane]), [['a', 'orders-a']]);
      assert.deepEqual((await rows(page)).map((r) => pageLaneCells(r, false)), mine.map((l) => laneCells(l, false)));
    });
    assert.equal(await page.locator('text=orders-b').count(), 0);
    assert.equal(await page.locator('code.lane-key', {hasText: XSS}).count(), 0);
    assert.equal((await asUser(page, 'GET', '/lanes?tenant=b')).status, 403);
    assert.deepEqual(await axeViolations(page), []);
    // The audit log needs every tenant: not offered, not reachable, refused by the API.
    await page.goto('/admin/a/tasks/audit');
    await page.locator('h1', {hasText: 'Not found'}).waitFor();
    assert.equal((await asUser(page, 'GET', '/audit')).status, 403);
    // Tenants: its own, no controls; the API refuses a change.
    await page.goto('/admin/a/tasks/tenants');
    await page.locator('#tenants-h').waitFor();
    await eventually(async () => {
      const mine = (await asUser(page, 'GET', '/tenants')).body.items;
      assert.deepEqual(mine.map((t) => t.id), ['a']);
      assert.deepEqual((await rows(page)).map((r) => r[0]), ['a']);
    });
    assert.equal(await page.locator('#tenant-id').count(), 0);
    assert.equal(await page.locator('main button').count(), 0);
    assert.equal((await asUser(page, 'POST', '/tenants', {id: 'a', active: false})).status, 403);
    assert.deepEqual(await axeViolations(page), []);
    // Workers: every worker, without the figures about other tenants' work.
    await page.goto('/admin/a/tasks/workers');
    await page.locator('#workers-summary').waitFor();
    await eventually(async () => {
      const api = (await asUser(page, 'GET', '/workers')).body.items;
      const shown = await rows(page);
      assert.equal(shown.length, api.length);
      assert.ok(api.every((w) => w.processed === null && w.failed === null));
      assert.ok(shown.every((r) => r[7] === '—' && r[8] === '—'), JSON.stringify(shown));
    });
    assert.deepEqual(await axeViolations(page), []);
    assert.deepEqual(page.pageErrors, []);
    await page.context().close();
  });
});

// --- Users and Tokens ----------------------------------------------------------------------------

describe('dashboard: users and tokens', () => {
  test('users: an admin adds a user whose password is shown once, then disabling it ends its session', T, async () => {
    const page = await newPage(browser, server);
    await logIn(page, 'admin');
    assert.deepEqual(await navPages(page), ['', 'executions', 'jobs', 'quarantine', 'lanes', 'workers',
                                            'audit', 'tenants', 'users', 'tokens']);
    await page.click('nav a[data-page=users]');
    await page.locator('#users-h').waitFor();
    await eventually(async () => {
      const api = (await server.api('GET', '/users')).body.items;
      assert.deepEqual((await rows(page)).map((r) => r.slice(0, 2)), api.map((u) => [u.name, u.role]));
    });
    // Bad input: a clear message, nothing sent.
    await page.fill('#user-name', 'Not A Name');
    await page.click('button:has-text("Add user")');
    assert.match(await page.locator('.action-status').textContent(), /must match/);
    await page.fill('#user-name', 'olga');
    await page.fill('#user-password', 'short');
    await page.click('button:has-text("Add user")');
    assert.match(await page.locator('.action-status').textContent(), /at least 12/);
    assert.ok(!(await server.api('GET', '/users')).body.items.some((u) => u.name === 'olga'));
    // Add with a generated password: shown once, accepted then confirmed.
    await page.fill('#user-password', '');
    await page.selectOption('#user-role', 'viewer');
    await page.fill('#user-tenants', 'a');
    await page.fill('#user-add-reason', 'new on-call');
    await watchActionStates(page);
    await page.click('button:has-text("Add user")');
    assert.deepEqual(await confirmedStates(page), ['sending', 'accepted', 'confirmed']);
    const password = await page.locator('#user-secret-value').inputValue();
    await screenshot(page, 'users');
    assert.ok(password.length >= 20, password);
    const listed = JSON.stringify((await server.api('GET', '/users')).body);
    assert.ok(listed.includes('"olga"') && !listed.includes(password));
    // The new user logs in with it (another browser context) and sees tenant a only.
    const olga = await newPage(browser, server);
    await olga.goto('/login');
    await olga.fill('#username', 'olga');
    await olga.fill('#password', password);
    await Promise.all([olga.waitForURL(/\/admin\/a\/tasks\/$/), olga.click('button[type=submit]')]);
    assert.deepEqual(await navPages(olga), ['', 'executions', 'jobs', 'quarantine', 'lanes', 'workers', 'tenants']);
    // Disable, with a reason: olga's next request goes back to the login page.
    const row = page.locator('main tbody tr', {hasText: 'olga'});
    await row.waitFor();
    await page.fill('#user-reason', 'left the team');
    await watchActionStates(page);
    await row.locator('button[aria-label="Disable user olga"]').click();
    assert.deepEqual(await confirmedStates(page), ['sending', 'accepted', 'confirmed']);
    await olga.goto('/admin/a/tasks/');
    await olga.locator('form[action="/login"]').waitFor();
    const audit = (await server.api('GET', '/audit?target=user%3Aolga')).body.items;
    assert.deepEqual(audit.map((a) => [a.actor, a.action, a.reason]),
                     [['admin', 'user.disable', 'left the team'], ['admin', 'user.add', 'new on-call']]);
    assert.ok(!JSON.stringify(audit).includes(password));
    assert.deepEqual(await axeViolations(page), []);
    assert.deepEqual(page.pageErrors, []);
    await olga.context().close();
    await page.context().close();
  });

  test('tokens: created with its secret shown once, usable at once, refused after revoking', T, async () => {
    const page = await newPage(browser, server);
    await logIn(page, 'admin');
    await page.goto('/admin/tasks/tokens');
    await page.locator('#tokens-h').waitFor();
    await page.fill('#token-name', 'billing');
    await page.click('button:has-text("Create token")');
    assert.match(await page.locator('.action-status').textContent(), /at least one scope/);
    await page.check('#token-scope-read');
    await page.fill('#token-expires', '3w');
    await page.click('button:has-text("Create token")');
    assert.match(await page.locator('.action-status').textContent(), /unit s, m, h or d/);
    await page.fill('#token-expires', '12h');
    await page.fill('#token-tenants', 'a');
    await watchActionStates(page);
    await page.click('button:has-text("Create token")');
    assert.deepEqual(await confirmedStates(page), ['sending', 'accepted', 'confirmed']);
    const secret = await page.locator('#token-secret-value').inputValue();
    assert.match(secret, /^te_[A-Za-z0-9_-]{43}$/);
    await page.locator('main tbody tr', {hasText: 'token:billing'}).waitFor();
    await screenshot(page, 'tokens');
    const use = () => fetch(server.url + '/api/v1/tenants', {headers: {Authorization: 'Bearer ' + secret}});
    const used = await use();
    assert.equal(used.status, 200);
    assert.deepEqual((await used.json()).items.map((t) => t.id), ['a']);
    const token = (await server.api('GET', '/tokens')).body.items.find((t) => t.name === 'billing');
    assert.deepEqual([token.principal, token.scopes, token.tenants, token.state],
                     ['token:billing', ['read'], ['a'], 'live']);
    const row = page.locator('main tbody tr', {hasText: 'token:billing'});
    await row.waitFor();
    assert.ok(!(await page.locator('main table').textContent()).includes(secret));
    await watchActionStates(page);
    await row.locator(`button[aria-label="Revoke token ${token.id} (billing)"]`).click();
    assert.deepEqual(await confirmedStates(page), ['sending', 'accepted', 'confirmed']);
    assert.equal((await use()).status, 401);
    await row.locator('td', {hasText: 'revoked'}).waitFor();
    assert.deepEqual(await axeViolations(page), []);
    assert.deepEqual(page.pageErrors, []);
    await page.context().close();
  });

  test('users and tokens are for admins with every tenant only', T, async () => {
    for (const user of ['victor', 'alice']) {
      const page = await newPage(browser, server);
      await logIn(page, user);
      const pages = await navPages(page);
      assert.ok(!pages.includes('users') && !pages.includes('tokens'), pages.join());
      for (const path of ['users', 'tokens']) {
        await page.goto((user === 'alice' ? '/admin/a/tasks/' : '/admin/tasks/') + path);
        await page.locator('h1', {hasText: 'Not found'}).waitFor();
        assert.equal((await asUser(page, 'GET', '/' + path)).status, 403);
      }
      assert.equal((await asUser(page, 'POST', '/users', {name: 'sneaky', role: 'admin'})).status, 403);
      assert.equal((await asUser(page, 'POST', '/tokens', {name: 'sneaky', scopes: ['admin']})).status, 403);
      await page.context().close();
    }
    const all = JSON.stringify((await server.api('GET', '/users')).body) +
                JSON.stringify((await server.api('GET', '/tokens')).body);
    assert.ok(!all.includes('sneaky'), 'nothing was created');
  });
});
