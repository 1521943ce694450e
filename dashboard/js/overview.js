// Overview: figure cards, 24-hour outcomes, throughput and failures over time
// (sampled from the engine's counters while the page is open), queue depths
// and, in the global view, the per-tenant table. All from GET /api/v1/stats.
import * as api from './api.js';
import {bars, lines} from './chart.js';
import {fill, h, table} from './dom.js';
import {count, duration} from './format.js';

const MAX_SAMPLES = 120;

function card(figure, label, value, hint) {
  return h('div', {class: 'card', 'data-figure': figure},
    h('span', {class: 'card-label'}, label),
    h('span', {class: 'card-value'}, value),
    hint ? h('span', {class: 'card-hint'}, hint) : null);
}

export function overview(ctx) {
  const cards = h('section', {class: 'cards', 'aria-label': 'Figures'});
  const charts = h('section', {class: 'charts', 'aria-labelledby': 'charts-h'});
  const queues = h('section', {'aria-labelledby': 'queues-h'});
  const tenants = h('section', {'aria-labelledby': 'tenants-h'});
  const error = h('p', {role: 'alert', class: 'error'});
  fill(ctx.main, h('h1', {}, 'Overview'), error, cards, charts, queues, tenants);
  const samples = [];  // {t, done, failed}: the engine's counters at each read

  async function refresh() {
    let s;
    try {
      s = await api.get('/stats');
      fill(error);
    } catch (e) {
      fill(error, e.message);
      throw e;
    }
    // In one tenant's view a global caller reads that tenant's row.
    const row = ctx.tenant && s.tenants ? s.tenants.find((t) => t.tenant === ctx.tenant) : null;
    const tenantView = Boolean(ctx.tenant && s.tenants);
    const last24 = row ? row.last_24h : s.last_24h;
    const figures = tenantView
      ? {queued: row ? row.queued : 0, running: row ? row.running : 0, oldest: null}
      : {queued: s.queued, running: s.running, oldest: s.oldest_due_age_ms};
    fill(cards,
         card('active_workers', 'Active workers', count(s.active_workers)),
         card('queued', 'Queued', count(figures.queued)),
         card('running', 'Running', count(figures.running)),
         card('failed_24h', 'Failed (24 h)', count(last24 ? last24.failed : 0)),
         card('quarantined_24h', 'Quarantined (24 h)', count(last24 ? last24.quarantined : 0)),
         card('succeeded_24h', 'Succeeded (24 h)', count(last24 ? last24.succeeded : 0)),
         card('oldest_queued_age', 'Oldest queued', tenantView ? '—' : duration(figures.oldest),
              figures.oldest === null && !tenantView ? 'nothing due' : null));

    if (s.engine) {
      samples.push({t: Date.now(), done: s.engine.succeeded + s.engine.failed, failed: s.engine.failed});
      if (samples.length > MAX_SAMPLES) samples.shift();
    }
    const rate = (key) => samples.slice(1).map((p, i) => ({
      t: p.t, v: Math.max(0, p[key] - samples[i][key]) * 60000 / Math.max(1, p.t - samples[i].t)}));
    fill(charts,
         h('h2', {id: 'charts-h'}, 'Throughput and failures'),
         bars('Outcomes in the last 24 hours', [
           {label: 'succeeded', value: last24 ? last24.succeeded : 0, cls: 'ok'},
           {label: 'failed', value: last24 ? last24.failed : 0, cls: 'bad'},
           {label: 'quarantined', value: last24 ? last24.quarantined : 0, cls: 'warn'},
           {label: 'canceled', value: last24 ? last24.canceled : 0, cls: 'muted'},
           {label: 'partially canceled', value: last24 ? last24.partially_canceled : 0, cls: 'warn'},
         ]),
         lines('Finished per minute on this server while this page is open',
               [{label: 'finished', cls: 'ok', points: rate('done')},
                {label: 'failed', cls: 'bad', points: rate('failed')}], 'per minute'));

    fill(queues, h('h2', {id: 'queues-h'}, 'Queue depths'),
         tenantView
           ? h('p', {}, 'Queue depths are shown for all tenants together, in the global view.')
           : table('Executions per queue', [
             {label: 'Queue', cell: (q) => q.queue},
             {label: 'Queued', cell: (q) => count(q.queued), class: 'num'},
             {label: 'Running', cell: (q) => count(q.running), class: 'num'},
             {label: 'Failed', cell: (q) => count(q.by_status.failed), class: 'num'},
             {label: 'Quarantined', cell: (q) => count(q.by_status.quarantined), class: 'num'},
             {label: 'Oldest due', cell: (q) => duration(q.oldest_due_age_ms), class: 'num'},
           ], s.queues || [], 'No queue holds executions.'));

    if (ctx.tenant || !s.tenants) {
      fill(tenants);
      return;
    }
    fill(tenants, h('h2', {id: 'tenants-h'}, 'Tenants'),
         table('Executions per tenant', [
           {label: 'Tenant', cell: (t) => t.tenant === null ? '(global jobs)'
             : h('a', {href: '/admin/' + encodeURIComponent(t.tenant) + '/tasks/'}, t.tenant)},
           {label: 'Queued', cell: (t) => count(t.queued), class: 'num'},
           {label: 'Running', cell: (t) => count(t.running), class: 'num'},
           {label: 'Succeeded (24 h)', cell: (t) => count(t.succeeded_24h), class: 'num'},
           {label: 'Failed (24 h)', cell: (t) => count(t.failed_24h), class: 'num'},
           {label: 'Quarantined', cell: (t) => count(t.by_status.quarantined), class: 'num'},
         ], s.tenants, 'No executions yet.'));
  }
  return {refresh};
}
