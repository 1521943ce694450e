// Audit log: every operator action (cancel, replay, approval, job and tenant
// edits...), newest first, 50 per page, with the state before and after shown
// as JSON text; filtered by an exact target ("job:nightly", "execution:42",
// "tenant:acme"). GET /api/v1/audit?target=&cursor=&limit=: admins with every
// tenant only, so this page is in the global view only.
import * as api from './api.js';
import {fill, h, table} from './dom.js';
import {time} from './format.js';

export const AUDIT_PAGE_SIZE = 50;

// The state before or after as text; null (nothing recorded) as a dash.
function stateText(value) {
  if (value === null || value === undefined) return '—';
  return h('code', {class: 'audit-json'}, JSON.stringify(value));
}

export function audit(ctx) {
  const params = new URLSearchParams(location.search);
  const target = params.get('target') || '';
  const cursor = params.get('cursor') || '';
  const input = h('input', {id: 'f-target', name: 'target', value: target, size: 30, maxlength: 300,
                            placeholder: 'job:nightly', 'aria-describedby': 'f-target-hint'});
  const form = h('form', {class: 'filters', role: 'search', 'aria-label': 'Filter the audit log'},
    h('label', {for: 'f-target'}, 'Target'), input,
    h('button', {type: 'submit'}, 'Apply'),
    target ? h('a', {href: ctx.link('audit'), 'data-nav': ''}, 'Every target') : null,
    h('span', {id: 'f-target-hint', class: 'hint'},
      'exact target, e.g. job:NAME, execution:ID, tenant:ID, principal:NAME'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const q = new URLSearchParams();
    if (input.value.trim()) q.set('target', input.value.trim());
    ctx.navigate(ctx.link('audit') + (q.toString() ? '?' + q : ''));
  });
  const error = h('p', {role: 'alert', class: 'error'});
  const results = h('div', {'aria-live': 'polite'});
  fill(ctx.main, h('h1', {}, 'Audit log'), form, error, results);

  const filterLink = (t) => h('a', {href: ctx.link('audit') + '?' + new URLSearchParams({target: t}),
                                    'data-nav': '', title: 'Only this target'}, t);

  async function refresh() {
    let page;
    try {
      page = await api.get('/audit', {target, cursor, limit: AUDIT_PAGE_SIZE});
      fill(error);
    } catch (e) {
      fill(error, e.message);
      fill(results);
      return;
    }
    const newest = new URLSearchParams(target ? {target} : {});
    const older = new URLSearchParams(target ? {target} : {});
    if (page.next_cursor) older.set('cursor', page.next_cursor);
    fill(results,
      table(target ? 'Audit records of ' + target + ', newest first' : 'Audit records, newest first', [
        {label: 'When', cell: (a) => time(a.at)},
        {label: 'Who', cell: (a) => a.actor},
        {label: 'Tenant', cell: (a) => a.tenant === null ? '—' : a.tenant},
        {label: 'Action', cell: (a) => a.action},
        {label: 'Target', cell: (a) => {
          const m = /^execution:([0-9]{1,19})$/.exec(a.target);
          return [filterLink(a.target),
                  m ? [' ', h('a', {href: ctx.link('executions/' + m[1]), 'data-nav': '',
                                    'aria-label': 'Open execution ' + m[1]}, 'open')] : null];
        }},
        {label: 'Reason', cell: (a) => a.reason === null ? '' : h('span', {class: 'audit-reason'}, a.reason)},
        {label: 'Before', cell: (a) => stateText(a.before)},
        {label: 'After', cell: (a) => stateText(a.after)},
      ], page.items, target ? 'No audit record has this target.' : 'No audit record yet.'),
      h('nav', {class: 'pager', 'aria-label': 'Pages'},
        cursor ? h('a', {href: ctx.link('audit') + (newest.toString() ? '?' + newest : ''), 'data-nav': ''},
                   '← Newest') : null,
        page.next_cursor ? h('a', {href: ctx.link('audit') + '?' + older, 'data-nav': ''}, 'Older →') : null));
  }
  return {refresh};
}
