// Executions: the filtered, paginated list and one execution's detail
// (timeline, logs, result, effects and escaped effects, audit) with the
// actions cancel, replay and approve.
import * as api from './api.js';
import {append, fill, h, table} from './dom.js';
import {count, duration, STATUSES, statusLabel, TERMINAL, time, TRIGGERS} from './format.js';
import {actionStatus, runAction} from './live.js';

const PAGE_SIZE = 50;

export function statusBadge(status) {
  return h('span', {class: 'status status-' + status}, statusLabel(status));
}

export function executionLink(ctx, id) {
  return h('a', {href: ctx.link('executions/' + id), 'data-nav': ''}, '#' + id);
}

// The columns of execution tables.
export function executionColumns(ctx) {
  return [
    {label: 'Id', cell: (e) => executionLink(ctx, e.id)},
    {label: 'Job', cell: (e) => e.job},
    ctx.tenant ? null : {label: 'Tenant', cell: (e) => e.tenant === null ? '—' : e.tenant},
    {label: 'Status', cell: (e) => statusBadge(e.status)},
    {label: 'Trigger', cell: (e) => e.trigger},
    {label: 'Attempt', cell: (e) => e.attempt + ' / ' + e.max_attempts, class: 'num'},
    {label: 'Queued', cell: (e) => time(e.queued_at)},
    {label: 'Duration', cell: (e) => duration(e.duration_ms), class: 'num'},
    {label: 'Error', cell: (e) => e.error === null ? '' : h('span', {class: 'clip'}, e.error)},
  ].filter(Boolean);
}

function toIso(local) {
  if (!local) return '';
  const d = new Date(local);
  return isNaN(d) ? '' : d.toISOString();
}

function select(id, label, options, value) {
  return [h('label', {for: id}, label),
          h('select', {id, name: id},
            h('option', {value: ''}, 'any'),
            options.map((o) => h('option', {value: o, selected: o === value}, statusLabel(o))))];
}

// GET .../executions?job=&tenant=&status=&trigger=&from=&to=&cursor=
export function executionList(ctx) {
  const params = new URLSearchParams(location.search);
  const value = (k) => params.get(k) || '';
  const form = h('form', {class: 'filters', role: 'search', 'aria-label': 'Filter executions'},
    h('label', {for: 'f-job'}, 'Job'),
    h('input', {id: 'f-job', name: 'job', value: value('job'), size: 14}),
    ctx.tenant ? null : [h('label', {for: 'f-tenant'}, 'Tenant'),
                         h('input', {id: 'f-tenant', name: 'tenant', value: value('tenant'), size: 10})],
    select('f-status', 'Status', STATUSES, value('status')),
    select('f-trigger', 'Trigger', TRIGGERS, value('trigger')),
    h('label', {for: 'f-from'}, 'Queued from'),
    h('input', {id: 'f-from', name: 'from', type: 'datetime-local', value: value('from')}),
    h('label', {for: 'f-to'}, 'to'),
    h('input', {id: 'f-to', name: 'to', type: 'datetime-local', value: value('to')}),
    h('button', {type: 'submit'}, 'Apply'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const q = new URLSearchParams();
    for (const [k, id] of [['job', 'f-job'], ['tenant', 'f-tenant'], ['status', 'f-status'],
                           ['trigger', 'f-trigger'], ['from', 'f-from'], ['to', 'f-to']]) {
      const el = form.querySelector('#' + id);
      if (el && el.value) q.set(k, el.value);
    }
    ctx.navigate(ctx.link('executions') + (q.toString() ? '?' + q : ''));
  });
  const error = h('p', {role: 'alert', class: 'error'});
  const results = h('div', {'aria-live': 'polite'});
  fill(ctx.main, h('h1', {}, 'Executions'), form, error, results);

  async function refresh() {
    const query = {
      job: value('job'), status: value('status'), trigger: value('trigger'),
      tenant: ctx.tenant || value('tenant'),
      queued_from: toIso(value('from')), queued_to: toIso(value('to')),
      cursor: value('cursor'), limit: PAGE_SIZE,
    };
    let page;
    try {
      page = await api.get('/executions', query);
      fill(error);
    } catch (e) {
      fill(error, e.message);
      fill(results);
      return;
    }
    const here = new URLSearchParams(location.search);
    const newest = new URLSearchParams(here);
    newest.delete('cursor');
    const older = new URLSearchParams(here);
    if (page.next_cursor) older.set('cursor', page.next_cursor);
    fill(results,
         table('Executions, newest first', executionColumns(ctx), page.items,
               'No execution matches.'),
         h('nav', {class: 'pager', 'aria-label': 'Pages'},
           value('cursor') ? h('a', {href: ctx.link('executions') + (newest.toString() ? '?' + newest : ''),
                                     'data-nav': ''}, '← Newest') : null,
           page.next_cursor ? h('a', {href: ctx.link('executions') + '?' + older, 'data-nav': ''},
                                'Older →') : null));
  }
  return {refresh};
}

// The replay form: a reason (required) and how to treat effects whose outcome
// is unknown. `onDone(reply)` after the server accepted.
export function replayForm(ctx, execution, ambiguous, status) {
  const id = 'replay-' + execution.id;
  const reason = h('input', {id: id + '-reason', name: 'reason', 'aria-required': 'true', maxlength: 1000, size: 40});
  const assume = h('select', {id: id + '-assume', name: 'assume'},
    h('option', {value: 'keep'}, 'keep them unknown (the handler decides, nothing is assumed)'),
    h('option', {value: 'done'}, 'assume they happened (never repeat them)'),
    h('option', {value: 'not_done'}, 'assume they did not happen (they may run again)'));
  const form = h('form', {class: 'action-form', 'aria-label': 'Replay execution ' + execution.id},
    h('label', {for: id + '-reason'}, 'Reason (required)'), reason,
    ambiguous > 0 ? [h('label', {for: id + '-assume'}, 'Effects of unknown outcome'), assume] : null,
    h('button', {type: 'submit'}, 'Replay'));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (!reason.value.trim()) {
      fill(status, 'A replay needs a reason.');
      reason.focus();
      return;
    }
    const body = {reason: reason.value.trim()};
    if (ambiguous > 0) body.assume = assume.value;
    const before = execution.status;
    await runAction(status, 'Replay of #' + execution.id,
      () => api.mutate('POST', '/executions/' + execution.id + '/replay', body),
      async (reply) => {
        if (reply && reply.outcome === 'pending_approval') {
          return {done: true, text: 'requested; it runs once another operator approves it (four-eyes)'};
        }
        const e = await api.get('/executions/' + execution.id);
        if (e.status === before && e.trigger !== 'replay') return null;
        return {done: true, text: 'the execution is ' + statusLabel(e.status) + ' again (trigger ' + e.trigger + ')'};
      });
  });
  return form;
}

function pendingApproval(audit) {
  for (const a of audit || []) {  // newest first
    if (a.action === 'execution.replay_requested') return true;
    if (a.action === 'execution.replay_approved' || a.action === 'execution.replay' ||
        a.action === 'execution.replayed') return false;
  }
  return false;
}

function json(value) {
  return h('pre', {class: 'json'}, JSON.stringify(value, null, 2));
}

function effectsTable(caption, effects) {
  return table(caption, [
    {label: 'Effect', cell: (f) => f.name},
    {label: 'Key', cell: (f) => h('code', {}, f.key)},
    {label: 'State', cell: (f) => f.state === 'committed' ? h('span', {class: 'status status-succeeded'}, 'happened')
      : h('span', {class: 'status status-quarantined'}, 'unknown')},
    {label: 'Attempt', cell: (f) => f.attempt, class: 'num'},
    {label: 'Reserved', cell: (f) => time(f.reserved_at)},
    {label: 'Committed', cell: (f) => time(f.committed_at)},
    {label: 'Detail', cell: (f) => f.detail || ''},
  ], effects, 'None.');
}

function timeline(e) {
  const items = [h('li', {}, h('strong', {}, 'Queued'), ' ', time(e.queued_at),
                   e.scheduled_at ? ' (fire time ' + time(e.scheduled_at) + ')' : '',
                   e.run_at && e.run_at !== e.queued_at ? ', not before ' + time(e.run_at) : '')];
  for (const a of e.attempts || []) {
    items.push(h('li', {},
      h('strong', {}, 'Attempt ' + a.attempt), ' on ', a.worker || 'unknown worker',
      ': started ', time(a.started_at),
      a.ended_at ? [', ended ', time(a.ended_at), ' — ', statusBadge(a.outcome)] : ' — running',
      a.failure_class ? ' (' + a.failure_class.replace('_', ' ') + ')' : '',
      a.released ? ' (released at shutdown)' : '',
      a.error ? h('div', {class: 'error-text'}, a.error) : null));
  }
  if (e.status === 'running') {
    items.push(h('li', {}, h('strong', {}, 'Progress'), ' ', e.progress + ' %',
                 e.lease_expires_at ? ', lease until ' + time(e.lease_expires_at) : '',
                 e.cancel_requested ? ' — cancel requested' : ''));
  }
  if (e.finished_at) {
    items.push(h('li', {}, h('strong', {}, 'Finished'), ' ', time(e.finished_at), ' — ',
                 statusBadge(e.status), ' after ', duration(e.duration_ms)));
  }
  return h('ol', {class: 'timeline'}, items);
}

// GET .../executions/<id>
export function executionDetail(ctx, {id}) {
  const status = actionStatus();
  const body = h('div');
  fill(ctx.main, h('h1', {}, 'Execution #' + id), status, body);
  let actionsBuiltFor = null;  // the status the action forms were built for
  const actions = h('section', {'aria-labelledby': 'actions-h'});
  const data = h('div');
  append(body, actions, data);
  let result = undefined;

  async function refresh() {
    let e;
    try {
      e = await api.get('/executions/' + id);
    } catch (err) {
      if (err.status === 404) {
        document.title = 'Not found — taskengine';
        fill(ctx.main, h('h1', {}, 'Not found'),
             h('p', {}, 'There is no such page, or you may not see it.'),
             h('p', {}, h('a', {href: ctx.link('executions'), 'data-nav': ''}, 'Back to the executions')));
        return;
      }
      throw err;
    }
    if (e.result_url && result === undefined) {
      try {
        result = await api.get(e.result_url.replace(/^\/api\/v1/, ''));
      } catch (err) {
        result = {error: err.message};
      }
    }
    const ambiguous = (e.effects || []).filter((f) => f.state === 'reserved').length;
    const pending = pendingApproval(e.audit);
    const key = e.status + '/' + ambiguous + '/' + pending;
    if (actionsBuiltFor !== key) {  // rebuilt only when what may be done changed
      actionsBuiltFor = key;
      const forms = [];
      if (ctx.can('operate') && (e.status === 'queued' || e.status === 'running') && !e.cancel_requested) {
        const reason = h('input', {id: 'cancel-reason', name: 'reason', maxlength: 1000, size: 30});
        const form = h('form', {class: 'action-form', 'aria-label': 'Cancel execution ' + e.id},
          h('label', {for: 'cancel-reason'}, 'Reason (optional)'), reason,
          h('button', {type: 'submit', class: 'danger'}, 'Cancel execution'));
        form.addEventListener('submit', (event) => {
          event.preventDefault();
          const b = reason.value.trim() ? {reason: reason.value.trim()} : {};
          runAction(status, 'Cancel of #' + e.id,
            () => api.mutate('POST', '/executions/' + e.id + '/cancel', b),
            async () => {
              const now = await api.get('/executions/' + e.id);
              if (!TERMINAL.has(now.status)) return {done: false, text: 'cancel requested, still ' + statusLabel(now.status)};
              return {done: true, text: 'the execution is ' + statusLabel(now.status)};
            });
        });
        forms.push(form);
      }
      if (ctx.can('operate') && TERMINAL.has(e.status) && e.status !== 'succeeded' && !pending) {
        forms.push(replayForm(ctx, e, ambiguous, status));
      }
      if (ctx.can('operate') && pending) {
        const approve = h('button', {type: 'button'}, 'Approve the pending replay');
        approve.addEventListener('click', () => {
          const before = e.status;
          runAction(status, 'Approval of the replay of #' + e.id,
            () => api.mutate('POST', '/executions/' + e.id + '/approve', {}),
            async () => {
              const now = await api.get('/executions/' + e.id);
              if (now.status === before) return null;
              return {done: true, text: 'the execution is ' + statusLabel(now.status)};
            });
        });
        forms.push(h('p', {}, 'A replay waits for approval by an operator other than the one who asked (four-eyes). ', approve));
      }
      fill(actions, forms.length ? [h('h2', {id: 'actions-h'}, 'Actions'), forms] : null);
    }
    fill(data,
      h('dl', {class: 'facts'},
        [['Status', statusBadge(e.status)], ['Job', e.job], ['Tenant', e.tenant === null ? '— (global job)' : e.tenant],
         ['Queue', e.queue], ['Trigger', e.trigger], ['Requested by', e.requester],
         ['Attempt', e.attempt + ' of ' + e.max_attempts], ['Worker', e.worker || '—'],
         ['Idempotency key', e.idempotency_key || '—'], ['Lane', e.lane_key || '—'],
         ['Parent', e.parent ? executionLink(ctx, e.parent) : '—'],
         ['Failure class', e.failure_class ? e.failure_class.replace('_', ' ') : '—']]
          .map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])),
      e.error ? [h('h2', {}, 'Error'), h('pre', {class: 'error-text', id: 'execution-error'}, e.error)] : null,
      h('h2', {}, 'Timeline'), timeline(e),
      h('h2', {}, 'Logs'),
      (e.logs || []).length === 0 ? h('p', {class: 'empty'}, 'No log lines.')
        : h('ol', {class: 'logs', id: 'execution-logs'}, e.logs.map((l) =>
          h('li', {class: 'log-' + l.level}, h('time', {}, time(l.at)), ' ',
            h('span', {class: 'level'}, l.level), ' ', h('span', {class: 'message'}, l.message)))),
      result !== undefined ? [h('h2', {}, 'Result'), json(result)] : null,
      h('h2', {}, 'Payload'), json(e.payload),
      h('h2', {}, 'Effects'),
      h('p', {class: 'explain'},
        'An effect is a side effect the handler declared (a notice sent, a file written). ',
        '"Happened" means it was confirmed. "Unknown" means an attempt reserved it and then ended ',
        'without confirming it: it may or may not have happened, and it is never guessed. ',
        'A replay keeps the effect keys, so effects that happened are not repeated; for unknown ones ',
        'the operator decides when replaying.'),
      effectsTable('Effects of this execution', e.effects || []),
      (e.escaped_effects || []).length ? [
        h('h2', {}, 'Escaped effects'),
        h('p', {class: 'explain'},
          'The execution was canceled after these effects had happened or may have happened. ',
          'Canceling did not undo them; check them by hand.'),
        effectsTable('Effects that escaped the cancellation', e.escaped_effects)] : null,
      h('h2', {}, 'Audit'),
      table('Operator actions on this execution', [
        {label: 'When', cell: (a) => time(a.at)},
        {label: 'Who', cell: (a) => a.actor},
        {label: 'Action', cell: (a) => a.action},
        {label: 'Reason', cell: (a) => a.reason || ''},
      ], e.audit || [], 'No operator action.'));
  }
  return {refresh};
}
