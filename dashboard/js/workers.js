// Workers: every worker the server knows (GET /api/v1/workers): each node's
// in-process pool and each remote worker process, live, stale or stopped.
// Stale ones (no report for longer than their kind allows) come first, then
// busy, idle and stopped. For a user bound to tenants the API hides the
// figures that tell about other tenants' work (null, shown as "—").
import * as api from './api.js';
import {fill, h, table} from './dom.js';
import {count, duration, time} from './format.js';
import {executionLink} from './executions.js';

const ORDER = {stale: 0, busy: 1, idle: 2, stopped: 3};

function stateBadge(state) {
  const cls = {stale: 'status-failed', busy: 'status-running', idle: 'status-succeeded'}[state] || '';
  return h('span', {class: 'status ' + cls}, state);
}

function ago(iso) {
  if (!iso) return null;
  const ms = Date.now() - new Date(iso).getTime();
  return h('div', {class: 'hint'}, ms < 0 ? 'just now' : duration(ms) + ' ago');
}

export function workers(ctx) {
  const error = h('p', {role: 'alert', class: 'error'});
  const list = h('div');
  fill(ctx.main, h('h1', {}, 'Workers'),
       h('p', {class: 'explain'},
         'A worker is one process that runs executions: the pool inside each taskengine serve (kind ',
         '"pool") or a remote worker started with worker:start (kind "remote"). A worker that has not ',
         'reported for longer than its kind allows is stale: its executions come back when their ',
         'leases expire.'),
       error, list);

  async function refresh() {
    let page;
    try {
      page = await api.get('/workers');
      fill(error);
    } catch (e) {
      fill(error, e.message);
      throw e;
    }
    const items = page.items.slice().sort((a, b) => (ORDER[a.state] ?? 4) - (ORDER[b.state] ?? 4));
    const live = items.filter((w) => w.state === 'idle' || w.state === 'busy').length;
    fill(list,
      h('p', {id: 'workers-summary'}, count(live) + ' live (idle or busy), ' +
        count(items.length - live) + ' stale or stopped.'),
      table('Workers, stale first, then busy, idle and stopped', [
        {label: 'Worker', cell: (w) => [h('code', {}, w.id), w.name ? h('div', {class: 'hint'}, w.name) : null]},
        {label: 'Kind', cell: (w) => w.kind},
        {label: 'State', cell: (w) => stateBadge(w.state)},
        {label: 'Host', cell: (w) => w.host === null ? '—' : w.host},
        {label: 'PID', cell: (w) => w.pid === null ? '—' : String(w.pid), class: 'num'},
        {label: 'Concurrency', cell: (w) => count(w.concurrency), class: 'num'},
        {label: 'Busy', cell: (w) => count(w.busy), class: 'num'},
        {label: 'Processed', cell: (w) => count(w.processed), class: 'num'},
        {label: 'Failed', cell: (w) => count(w.failed), class: 'num'},
        {label: 'Started', cell: (w) => time(w.started_at)},
        {label: 'Last heartbeat', cell: (w) => [time(w.last_seen_at), ago(w.last_seen_at)]},
        {label: 'Queues', cell: (w) => w.queues.length ? w.queues.join(', ') : '—'},
        {label: 'Running now', cell: (w) => w.current.length
          ? w.current.map((id, i) => [i ? ' ' : '', executionLink(ctx, id)]) : '—'},
      ], items, 'No worker has registered.'));
  }
  return {refresh};
}
