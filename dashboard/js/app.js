// The dashboard's entry point: works out the view (global /admin/tasks/ or
// one tenant's /admin/<tenant>/tasks/) from the address, routes the rest of
// the path to a page (history API), and runs the live refresh.
import * as api from './api.js';
import {fill, h} from './dom.js';
import * as live from './live.js';
import {tokens, users} from './accounts.js';
import {audit} from './audit.js';
import {executionDetail, executionList} from './executions.js';
import {jobs} from './jobs.js';
import {lanes} from './lanes.js';
import {overview} from './overview.js';
import {quarantine} from './quarantine.js';
import {tenants} from './tenants.js';
import {workers} from './workers.js';

// Every page; `may(ctx)` says whether the user may use it, exactly as the API
// decides (a page the user may not use is neither in the navigation nor
// reachable: its address shows the not-found page).
const everyone = () => true;
const globalAdmin = (ctx) => ctx.can('admin') && ctx.allTenants && ctx.tenant === null;
const PAGES = [
  {path: '', title: 'Overview', render: overview, may: everyone},
  {path: 'executions', title: 'Executions', render: executionList, may: everyone},
  {path: 'jobs', title: 'Jobs', render: jobs, may: everyone},
  {path: 'quarantine', title: 'Quarantine', render: quarantine, may: everyone},
  {path: 'lanes', title: 'Lanes', render: lanes, may: everyone},
  {path: 'workers', title: 'Workers', render: workers, may: everyone},
  // GET /api/v1/audit needs admin scope and every tenant: the global view only.
  {path: 'audit', title: 'Audit log', render: audit,
   may: globalAdmin},
  {path: 'tenants', title: 'Tenants', render: tenants, may: everyone},
  // /api/v1/users and /api/v1/tokens: admin scope and every tenant, global view.
  {path: 'users', title: 'Users', render: users, may: globalAdmin},
  {path: 'tokens', title: 'Tokens', render: tokens, may: globalAdmin},
];

function scopeOf(pathname) {
  const segments = pathname.split('/');  // ['', 'admin', 'tasks' | tenant, ...]
  if (segments[2] === 'tasks') {
    return {tenant: null, base: '/admin/tasks', rest: segments.slice(3)};
  }
  return {tenant: segments[2], base: '/admin/' + segments[2] + '/tasks', rest: segments.slice(4)};
}

const HOLDS = {admin: ['admin', 'operate', 'dispatch', 'read'], operate: ['operate', 'read'],
               dispatch: ['dispatch', 'read'], read: ['read'], worker: []};

function makeContext(session) {
  const {tenant, base} = scopeOf(location.pathname);
  const held = new Set((session.scopes || []).flatMap((s) => HOLDS[s] || []));
  return {
    tenant,
    base,
    session,
    allTenants: Boolean(session.all_tenants),
    main: document.getElementById('main'),
    can: (scope) => held.has(scope),
    link: (path) => base + '/' + path,
    navigate,
  };
}

let ctx = null;

function navigate(href) {
  history.pushState(null, '', href);
  route();
}

export function notFound(main) {
  fill(main,
       h('h1', {}, 'Not found'),
       h('p', {}, 'There is no such page, or you may not see it.'),
       h('p', {}, h('a', {href: ctx.link(''), 'data-nav': ''}, 'Back to the overview')));
}

function route() {
  const {rest} = scopeOf(location.pathname);
  const path = rest.filter((s) => s !== '');
  let page = null;
  let params = {};
  if (path.length === 0) {
    page = PAGES[0];
  } else if (path[0] === 'executions' && path.length === 2 && /^[0-9]{1,19}$/.test(path[1])) {
    page = {path: 'executions', title: 'Execution ' + path[1], render: executionDetail};
    params = {id: path[1]};
  } else if (path.length === 1) {
    page = PAGES.find((p) => p.path === path[0] && p.may(ctx)) || null;
  }
  for (const a of document.querySelectorAll('#nav a')) {
    const current = page && a.dataset.page === page.path;
    if (current) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  const scope = ctx.tenant ? 'tenant ' + ctx.tenant : 'all tenants';
  if (!page) {
    document.title = 'Not found — taskengine';
    notFound(ctx.main);
    live.setPage(null);
    return;
  }
  document.title = page.title + ' (' + scope + ') — taskengine';
  const view = page.render(ctx, params);
  live.setPage(view.refresh);
}

async function start() {
  let session;
  try {
    session = await api.session();
  } catch (e) {
    fill(document.getElementById('main'), h('p', {role: 'alert'}, e.message));
    return;
  }
  ctx = makeContext(session);
  fill(document.getElementById('nav'),
       h('ul', {}, PAGES.filter((p) => p.may(ctx)).map((p) =>
         h('li', {}, h('a', {href: ctx.link(p.path), 'data-nav': '', 'data-page': p.path}, p.title)))));
  fill(document.getElementById('who'), session.name,
       ' · ', ctx.tenant ? 'tenant ' + ctx.tenant : 'all tenants');
  const updated = h('span', {id: 'updated', role: 'status'});
  document.getElementById('who').after(updated);
  live.onRefreshed((error) => {
    fill(updated, error ? 'refresh failed: ' + error.message
                        : 'updated ' + new Date().toLocaleTimeString() + ' · every 5 s, paused while hidden');
    updated.classList.toggle('stale', Boolean(error));
  });
  document.getElementById('logout').addEventListener('click', async () => {
    try {
      await api.logout();
    } finally {
      location.assign('/login');
    }
  });
  // Links inside the app change the page without a reload.
  document.addEventListener('click', (event) => {
    const a = event.target.closest('a[data-nav]');
    if (!a || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) return;
    event.preventDefault();
    navigate(a.getAttribute('href'));
  });
  window.addEventListener('popstate', route);
  route();
}

start();
