// Tenants: the tenants the user may see (GET /api/v1/tenants) with their
// active flag, each linked to its view. Admins with every tenant (the API's
// rule for POST /api/v1/tenants) add tenants and enable or disable them; both
// are audited by the API (tenant.create, tenant.update) with the reason given.
// Per-tenant jobs fan out to active tenants only.
import * as api from './api.js';
import {fill, h, table} from './dom.js';
import {time} from './format.js';
import {actionStatus, runAction} from './live.js';

// The API's rule for tenant ids.
export const TENANT_ID = /^[a-z0-9][a-z0-9_-]{0,49}$/;

export function tenants(ctx) {
  const status = actionStatus();
  const admin = ctx.can('admin') && ctx.allTenants;
  const error = h('p', {role: 'alert', class: 'error'});
  const list = h('section', {'aria-labelledby': 'tenants-h'});

  // Enable / disable: the reason (optional) is recorded in the audit log.
  const reason = h('input', {id: 'tenant-reason', name: 'reason', maxlength: 1000, size: 40});
  function setActive(tenant, active) {
    const body = {id: tenant.id, active};
    if (reason.value.trim()) body.reason = reason.value.trim();
    runAction(status, (active ? 'Enabling tenant ' : 'Disabling tenant ') + tenant.id,
      () => api.mutate('POST', '/tenants', body),
      async () => {
        const now = await api.get('/tenants/' + encodeURIComponent(tenant.id));
        return now.active === active
          ? {done: true, text: 'tenant ' + tenant.id + ' is ' + (active ? 'active' : 'disabled')} : null;
      });
  }

  // Add: id (the API's rule), name (default: the id), reason.
  const newId = h('input', {id: 'tenant-id', name: 'id', maxlength: 50, size: 20, 'aria-required': 'true',
                            'aria-describedby': 'tenant-id-hint', autocomplete: 'off'});
  const newName = h('input', {id: 'tenant-name', name: 'name', maxlength: 200, size: 30});
  const newReason = h('input', {id: 'tenant-add-reason', name: 'reason', maxlength: 1000, size: 40});
  const addForm = h('form', {class: 'run-form', 'aria-labelledby': 'tenant-add-h'},
    h('h2', {id: 'tenant-add-h'}, 'Add a tenant'),
    h('label', {for: 'tenant-id'}, 'Id (required)'), newId,
    h('p', {id: 'tenant-id-hint', class: 'hint'},
      'lower-case letters, digits, "-" and "_", starting with a letter or digit; at most 50'),
    h('label', {for: 'tenant-name'}, 'Name (default: the id)'), newName,
    h('label', {for: 'tenant-add-reason'}, 'Reason (optional, for the audit log)'), newReason,
    h('button', {type: 'submit'}, 'Add tenant'));
  addForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    const id = newId.value.trim();
    if (!TENANT_ID.test(id)) {
      fill(status, 'A tenant id must match [a-z0-9][a-z0-9_-]{0,49}.');
      newId.setAttribute('aria-invalid', 'true');
      newId.focus();
      return;
    }
    newId.removeAttribute('aria-invalid');
    // POST /tenants also updates an existing tenant: adding refuses one.
    try {
      await api.get('/tenants/' + encodeURIComponent(id));
      fill(status, 'Tenant ' + id + ' already exists.');
      return;
    } catch (e) {
      if (e.status !== 404) {
        fill(status, 'Could not check tenant ' + id + ': ' + e.message);
        return;
      }
    }
    const body = {id};
    if (newName.value.trim()) body.name = newName.value.trim();
    if (newReason.value.trim()) body.reason = newReason.value.trim();
    const reply = await runAction(status, 'Adding tenant ' + id,
      () => api.mutate('POST', '/tenants', body),
      async () => {
        try {
          const now = await api.get('/tenants/' + encodeURIComponent(id));
          return {done: true, text: 'tenant ' + now.id + ' exists and is ' + (now.active ? 'active' : 'disabled')};
        } catch (e) {
          if (e.status === 404) return null;
          throw e;
        }
      },
      (r) => ({text: r.status === 201 ? 'created' : 'it existed already and was updated'}));
    if (reply) {
      newId.value = '';
      newName.value = '';
      newReason.value = '';
    }
  });

  fill(ctx.main, h('h1', {}, 'Tenants'),
       h('p', {class: 'explain'},
         'A tenant is one customer or store: its executions, lanes and per-tenant jobs are its own. ',
         'Scheduled per-tenant jobs fan out to the active tenants only; a disabled tenant keeps its ',
         'executions and history.'),
       status, error,
       admin ? h('p', {class: 'action-form'},
                 h('label', {for: 'tenant-reason'}, 'Reason for enabling or disabling (optional, for the audit log)'),
                 reason) : null,
       list, admin ? addForm : null);

  async function refresh() {
    let page;
    try {
      page = await api.get('/tenants');
      fill(error);
    } catch (e) {
      fill(error, e.message);
      throw e;
    }
    fill(list, h('h2', {id: 'tenants-h'}, ctx.allTenants ? 'Every tenant' : 'Your tenants'),
      table('Tenants by id', [
        {label: 'Id', cell: (t) => h('a', {href: '/admin/' + encodeURIComponent(t.id) + '/tasks/'}, t.id)},
        {label: 'Name', cell: (t) => t.name || '—'},
        {label: 'Active', cell: (t) => t.active ? 'yes' : h('span', {class: 'status status-failed'}, 'disabled')},
        {label: 'Created', cell: (t) => time(t.created_at)},
        admin ? {label: 'Change', cell: (t) => h('button', {
          type: 'button', class: t.active ? 'small danger' : 'small',
          'aria-label': (t.active ? 'Disable tenant ' : 'Enable tenant ') + t.id,
          on: {click: () => setActive(t, !t.active)}}, t.active ? 'Disable' : 'Enable')} : null,
      ].filter(Boolean), page.items, 'No tenant.'));
  }
  return {refresh};
}
