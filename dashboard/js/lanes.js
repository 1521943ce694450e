// Lanes: the lanes with work that is not done, blocked ones first (as
// GET /api/v1/lanes orders them), each with its head execution linked and,
// for a blocked lane, why it blocks (the head failed or is quarantined) and
// the head's error. In a tenant's view, that tenant's lanes only.
import * as api from './api.js';
import {fill, h, table} from './dom.js';
import {count, statusLabel} from './format.js';
import {executionLink, statusBadge} from './executions.js';

export const LANE_LIMIT = 200;

// Why a lane waits, or what it runs, in words.
export function laneState(lane) {
  if (lane.head === null) return 'nothing open';
  if (lane.blocked) {
    return 'its head ' + (lane.head_status === 'failed' ? 'failed' : 'is ' + statusLabel(lane.head_status)) +
           ': the later members wait until an operator replays or cancels it';
  }
  return lane.head_status === 'running' ? 'its head is running' : 'its head is next to run';
}

export function lanes(ctx) {
  const error = h('p', {role: 'alert', class: 'error'});
  const list = h('div');
  fill(ctx.main, h('h1', {}, 'Lanes'),
       h('p', {class: 'explain'},
         'A lane runs the executions of one tenant that share a lane key one at a time, oldest first. ',
         'When its head fails or is quarantined, the lane is blocked: nothing behind it runs until an ',
         'operator replays or cancels the head; other lanes keep flowing. Only lanes with work that is ',
         'not done are listed, blocked ones first.'),
       error, list);
  // The errors of blocked heads, read once per head and status.
  const heads = new Map();  // id -> {status, error}

  async function headError(lane) {
    const known = heads.get(lane.head);
    if (known && known.status === lane.head_status) return known.error;
    let text;
    try {
      text = (await api.get('/executions/' + lane.head)).error;
    } catch (e) {
      text = null;
    }
    heads.set(lane.head, {status: lane.head_status, error: text});
    return text;
  }

  async function refresh() {
    let page;
    try {
      page = await api.get('/lanes', {tenant: ctx.tenant || '', limit: LANE_LIMIT});
      fill(error);
    } catch (e) {
      fill(error, e.message);
      throw e;
    }
    const items = page.items;
    const errors = new Map();
    await Promise.all(items.filter((l) => l.blocked && l.head !== null).slice(0, 50).map(async (l) => {
      errors.set(l.head, await headError(l));
    }));
    const blocked = items.filter((l) => l.blocked).length;
    fill(list,
      h('p', {id: 'lanes-summary'}, count(items.length) + ' lane' + (items.length === 1 ? '' : 's') +
        ' with open work, ' + count(blocked) + ' blocked' +
        (items.length === LANE_LIMIT ? ' (the first ' + LANE_LIMIT + ' shown)' : '') + '.'),
      table('Lanes, blocked first', [
        ctx.tenant ? null : {label: 'Tenant', cell: (l) => l.tenant === null ? '(global jobs)'
          : h('a', {href: '/admin/' + encodeURIComponent(l.tenant) + '/tasks/lanes'}, l.tenant)},
        {label: 'Lane key', cell: (l) => h('code', {class: 'lane-key'}, l.lane)},
        {label: 'State', cell: (l) => l.blocked ? h('span', {class: 'status status-failed'}, 'blocked')
          : h('span', {class: 'status status-running'}, 'flowing')},
        {label: 'Head', cell: (l) => l.head === null ? '—'
          : [executionLink(ctx, l.head), ' ', statusBadge(l.head_status)]},
        {label: 'Why', cell: (l) => [laneState(l),
          l.blocked && errors.get(l.head) ? h('div', {class: 'error-text head-error'}, errors.get(l.head)) : null]},
        {label: 'Queued', cell: (l) => count(l.queued), class: 'num'},
        {label: 'Running', cell: (l) => count(l.running), class: 'num'},
      ].filter(Boolean), items, 'No lane has open work.'));
  }
  return {refresh};
}
