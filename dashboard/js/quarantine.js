// Quarantine: executions that need an operator (poison or ambiguous), with
// their error and a replay form each.
import * as api from './api.js';
import {fill, h, table} from './dom.js';
import {executionColumns, replayForm} from './executions.js';
import {actionStatus} from './live.js';

export function quarantine(ctx) {
  const status = actionStatus();
  const error = h('p', {role: 'alert', class: 'error'});
  const list = h('div');
  const forms = new Map();  // execution id -> its replay form, kept across refreshes
  fill(ctx.main, h('h1', {}, 'Quarantine'),
       h('p', {class: 'explain'},
         'Executions stop here when they keep crashing their worker, when their payload cannot be ',
         'handled, or when an effect\'s outcome is unknown. Nothing runs again until an operator ',
         'replays them.'),
       status, error, list);

  async function refresh() {
    let page;
    try {
      page = await api.get('/executions', {status: 'quarantined', tenant: ctx.tenant || '', limit: 100});
      fill(error);
    } catch (e) {
      fill(error, e.message);
      throw e;
    }
    const columns = executionColumns(ctx);
    if (ctx.can('operate')) {
      columns.push({label: 'Replay', cell: (e) => {
        if (!forms.has(e.id)) forms.set(e.id, replayForm(ctx, e, e.ambiguous_failures > 0 ? 1 : 0, status));
        return forms.get(e.id);
      }});
    }
    fill(list, table('Quarantined executions, newest first', columns, page.items,
                     'Nothing is quarantined.'));
  }
  return {refresh};
}
