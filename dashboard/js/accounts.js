// Users and Tokens: for admins with every tenant (the API's rule for
// /api/v1/users and /api/v1/tokens), in the global view. Creating a user or a
// token shows its generated password or secret once, in this page only: the
// server keeps only a hash and never answers it again. Every change is
// audited by the API with the reason given.
import * as api from './api.js';
import {fill, h, table} from './dom.js';
import {time} from './format.js';
import {actionStatus, runAction} from './live.js';
import {TENANT_ID} from './tenants.js';

const USER_NAME = /^[a-z0-9._@-]{1,100}$/;
const TOKEN_NAME = /^[A-Za-z0-9._@-]{1,100}$/;
const LIFETIME = /^[0-9]{1,11}[smhd]$/;
const MIN_PASSWORD = 12;
const SCOPES = ['read', 'dispatch', 'operate', 'admin', 'worker'];

// "a, b" -> ['a', 'b']; '' -> [] (every tenant). Null when one is not a tenant id.
function tenantList(text) {
  const ids = text.split(',').map((s) => s.trim()).filter((s) => s !== '');
  return ids.every((id) => id === '*' || TENANT_ID.test(id)) ? ids : null;
}

function labeled(id, label, input, hint) {
  return [h('label', {for: id}, label), input,
          hint ? h('p', {id: id + '-hint', class: 'hint'}, hint) : null];
}

function invalid(status, input, message) {
  fill(status, message);
  input.setAttribute('aria-invalid', 'true');
  input.focus();
  return false;
}

// The secret of a new user or token, shown once with the warning.
function secretBox(box, what, secret) {
  const field = h('input', {id: box.id + '-value', readonly: true, value: secret, size: 50,
                            'aria-label': what, on: {focus: (e) => e.target.select()}});
  fill(box, h('p', {}, h('strong', {}, what + ': '), field),
       h('p', {class: 'hint'},
         'Copy it now: it is shown only this once. The server stores only its hash.'));
}

function reasonInput(id) {
  return h('input', {id, name: 'reason', maxlength: 1000, size: 40});
}

function withReason(body, input) {
  if (input.value.trim()) body.reason = input.value.trim();
  return body;
}

export function users(ctx) {
  const status = actionStatus();
  const error = h('p', {role: 'alert', class: 'error'});
  const list = h('section', {'aria-labelledby': 'users-h'});
  const secret = h('div', {id: 'user-secret', class: 'secret', 'aria-live': 'polite'});
  const reason = reasonInput('user-reason');

  function setDisabled(user, disabled) {
    runAction(status, (disabled ? 'Disabling user ' : 'Enabling user ') + user.name,
      () => api.mutate('POST', '/users/' + encodeURIComponent(user.name) + (disabled ? '/disable' : '/enable'),
                       withReason({}, reason)),
      async () => {
        const now = (await api.get('/users')).items.find((u) => u.name === user.name);
        return now && now.disabled === disabled
          ? {done: true, text: 'user ' + user.name + ' is ' + (disabled ? 'disabled' : 'enabled')} : null;
      });
  }

  const name = h('input', {id: 'user-name', name: 'name', maxlength: 100, size: 24, autocomplete: 'off',
                           'aria-required': 'true', 'aria-describedby': 'user-name-hint'});
  const role = h('select', {id: 'user-role', name: 'role'},
    h('option', {value: 'viewer'}, 'viewer — read'),
    h('option', {value: 'operator'}, 'operator — cancel, replay, approve, dispatch'),
    h('option', {value: 'admin'}, 'admin — everything, users and tokens included'));
  const tenants = h('input', {id: 'user-tenants', name: 'tenants', size: 30, autocomplete: 'off',
                              'aria-describedby': 'user-tenants-hint'});
  const password = h('input', {id: 'user-password', name: 'password', type: 'password', size: 30,
                               autocomplete: 'new-password', 'aria-describedby': 'user-password-hint'});
  const addReason = reasonInput('user-add-reason');
  const form = h('form', {class: 'run-form', 'aria-labelledby': 'user-add-h'},
    h('h2', {id: 'user-add-h'}, 'Add a user'),
    labeled('user-name', 'Name (required)', name, 'lower-case letters, digits, ".", "_", "@", "-"; at most 100'),
    labeled('user-role', 'Role', role),
    labeled('user-tenants', 'Tenants', tenants, 'comma-separated tenant ids; empty = every tenant'),
    labeled('user-password', 'Password (optional)', password,
            'at least ' + MIN_PASSWORD + ' characters; empty = generate one and show it once'),
    labeled('user-add-reason', 'Reason (optional, for the audit log)', addReason),
    h('button', {type: 'submit'}, 'Add user'), secret);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    for (const el of [name, tenants, password]) el.removeAttribute('aria-invalid');
    fill(secret);
    const wanted = name.value.trim();
    if (!USER_NAME.test(wanted)) return invalid(status, name, 'A user name must match [a-z0-9._@-]{1,100}.');
    const ids = tenantList(tenants.value);
    if (ids === null) return invalid(status, tenants, 'Tenants must be tenant ids separated by commas.');
    if (password.value !== '' && password.value.length < MIN_PASSWORD) {
      return invalid(status, password, 'A password needs at least ' + MIN_PASSWORD + ' characters.');
    }
    const body = withReason({name: wanted, role: role.value}, addReason);
    if (ids.length > 0) body.tenants = ids;
    if (password.value !== '') body.password = password.value;
    const reply = await runAction(status, 'Adding user ' + wanted,
      () => api.mutate('POST', '/users', body),
      async () => ((await api.get('/users')).items.some((u) => u.name === wanted)
        ? {done: true, text: 'user ' + wanted + ' exists'} : null));
    if (!reply) return;
    if (reply.data && reply.data.password) secretBox(secret, 'Password of ' + wanted, reply.data.password);
    name.value = '';
    tenants.value = '';
    password.value = '';
    addReason.value = '';
  });

  fill(ctx.main, h('h1', {}, 'Users'),
       h('p', {class: 'explain'},
         'People who log in to this dashboard. A role gives scopes; tenants bound a user to those ',
         'tenants\' data. A disabled user cannot log in and its open sessions end at once.'),
       status, error,
       h('p', {class: 'action-form'},
         h('label', {for: 'user-reason'}, 'Reason for disabling or enabling (optional, for the audit log)'),
         reason),
       list, form);

  async function refresh() {
    let page;
    try {
      page = await api.get('/users');
      fill(error);
    } catch (e) {
      fill(error, e.message);
      throw e;
    }
    fill(list, h('h2', {id: 'users-h'}, 'Every user'),
      table('Users by name', [
        {label: 'Name', cell: (u) => u.name},
        {label: 'Role', cell: (u) => u.role},
        {label: 'Scopes', cell: (u) => u.scopes.join(', ')},
        {label: 'Tenants', cell: (u) => u.tenants.includes('*') ? 'every tenant' : u.tenants.join(', ')},
        {label: 'State', cell: (u) => u.disabled ? h('span', {class: 'status status-failed'}, 'disabled') : 'active'},
        {label: 'Created', cell: (u) => time(u.created_at)},
        {label: 'Change', cell: (u) => h('button', {
          type: 'button', class: u.disabled ? 'small' : 'small danger',
          'aria-label': (u.disabled ? 'Enable user ' : 'Disable user ') + u.name,
          on: {click: () => setDisabled(u, !u.disabled)}}, u.disabled ? 'Enable' : 'Disable')},
      ], page.items, 'No user.'));
  }
  return {refresh};
}

export function tokens(ctx) {
  const status = actionStatus();
  const error = h('p', {role: 'alert', class: 'error'});
  const list = h('section', {'aria-labelledby': 'tokens-h'});
  const secret = h('div', {id: 'token-secret', class: 'secret', 'aria-live': 'polite'});
  const reason = reasonInput('token-reason');

  function revoke(token) {
    runAction(status, 'Revoking token ' + token.id + ' (' + token.name + ')',
      () => api.mutate('POST', '/tokens/' + token.id + '/revoke', withReason({}, reason)),
      async () => ((await api.get('/tokens')).items.some((t) => t.id === token.id && t.state === 'revoked')
        ? {done: true, text: 'token ' + token.id + ' is revoked'} : null));
  }

  const name = h('input', {id: 'token-name', name: 'name', maxlength: 100, size: 24, autocomplete: 'off',
                           'aria-required': 'true', 'aria-describedby': 'token-name-hint'});
  const scopeBoxes = SCOPES.map((s) => h('input', {type: 'checkbox', id: 'token-scope-' + s, value: s}));
  const scopes = h('fieldset', {id: 'token-scopes'}, h('legend', {}, 'Scopes (at least one)'),
    SCOPES.map((s, i) => h('span', {class: 'check'}, scopeBoxes[i], h('label', {for: 'token-scope-' + s}, s))),
    h('p', {class: 'hint'}, 'worker tokens reach only the worker protocol'));
  const tenants = h('input', {id: 'token-tenants', name: 'tenants', size: 30, autocomplete: 'off',
                              'aria-describedby': 'token-tenants-hint'});
  const expires = h('input', {id: 'token-expires', name: 'expires_in', size: 10, autocomplete: 'off',
                              'aria-describedby': 'token-expires-hint'});
  const principal = h('input', {id: 'token-principal', name: 'principal', maxlength: 200, size: 30,
                                autocomplete: 'off', 'aria-describedby': 'token-principal-hint'});
  const addReason = reasonInput('token-add-reason');
  const form = h('form', {class: 'run-form', 'aria-labelledby': 'token-add-h'},
    h('h2', {id: 'token-add-h'}, 'Create a token'),
    labeled('token-name', 'Name (required)', name, 'a label such as billing-worker: letters, digits, ".", "_", "@", "-"'),
    scopes,
    labeled('token-tenants', 'Tenants', tenants, 'comma-separated tenant ids; empty = every tenant'),
    labeled('token-expires', 'Expires in', expires, 'e.g. 3600s, 90m, 12h, 30d; empty = never'),
    labeled('token-principal', 'Principal (optional)', principal,
            'the identity its calls are made as; empty = token:<name>'),
    labeled('token-add-reason', 'Reason (optional, for the audit log)', addReason),
    h('button', {type: 'submit'}, 'Create token'), secret);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    for (const el of [name, tenants, expires]) el.removeAttribute('aria-invalid');
    fill(secret);
    const wanted = name.value.trim();
    if (!TOKEN_NAME.test(wanted)) return invalid(status, name, 'A token name must match [A-Za-z0-9._@-]{1,100}.');
    const chosen = scopeBoxes.filter((b) => b.checked).map((b) => b.value);
    if (chosen.length === 0) return invalid(status, scopeBoxes[0], 'Choose at least one scope.');
    const ids = tenantList(tenants.value);
    if (ids === null) return invalid(status, tenants, 'Tenants must be tenant ids separated by commas.');
    const lifetime = expires.value.trim();
    if (lifetime !== '' && !LIFETIME.test(lifetime)) {
      return invalid(status, expires, 'Expires in: a number and a unit s, m, h or d, e.g. 30d.');
    }
    const body = withReason({name: wanted, scopes: chosen}, addReason);
    if (ids.length > 0) body.tenants = ids;
    if (lifetime !== '') body.expires_in = lifetime;
    if (principal.value.trim()) body.principal = principal.value.trim();
    const reply = await runAction(status, 'Creating token ' + wanted,
      () => api.mutate('POST', '/tokens', body),
      async (created) => ((await api.get('/tokens')).items.some((t) => t.id === created.id)
        ? {done: true, text: 'token ' + created.id + ' is live'} : null),
      (r) => ({text: 'token ' + r.data.id}));
    if (!reply) return;
    secretBox(secret, 'Secret of token ' + reply.data.id + ' (' + wanted + ')', reply.data.secret);
    name.value = '';
    tenants.value = '';
    expires.value = '';
    principal.value = '';
    addReason.value = '';
    for (const b of scopeBoxes) b.checked = false;
  });

  fill(ctx.main, h('h1', {}, 'Tokens'),
       h('p', {class: 'explain'},
         'Bearer tokens for programs: dispatchers, remote workers, scripts. A token holds scopes and ',
         'may be bound to tenants; a revoked token is refused from its next request on.'),
       status, error,
       h('p', {class: 'action-form'},
         h('label', {for: 'token-reason'}, 'Reason for revoking (optional, for the audit log)'), reason),
       list, form);

  async function refresh() {
    let page;
    try {
      page = await api.get('/tokens');
      fill(error);
    } catch (e) {
      fill(error, e.message);
      throw e;
    }
    fill(list, h('h2', {id: 'tokens-h'}, 'Every token'),
      table('Tokens by id', [
        {label: 'Id', cell: (t) => String(t.id), class: 'num'},
        {label: 'Name', cell: (t) => t.name},
        {label: 'Principal', cell: (t) => t.principal},
        {label: 'Scopes', cell: (t) => t.scopes.join(', ')},
        {label: 'Tenants', cell: (t) => t.tenants.includes('*') ? 'every tenant' : t.tenants.join(', ')},
        {label: 'State', cell: (t) => t.state === 'live' ? 'live' : h('span', {class: 'status status-failed'}, t.state)},
        {label: 'Expires', cell: (t) => t.expires_at ? time(t.expires_at) : 'never'},
        {label: 'Last used', cell: (t) => time(t.last_used_at)},
        {label: 'Change', cell: (t) => t.state === 'revoked' ? '—' : h('button', {
          type: 'button', class: 'small danger', 'aria-label': 'Revoke token ' + t.id + ' (' + t.name + ')',
          on: {click: () => revoke(t)}}, 'Revoke')},
      ], page.items, 'No token.'));
  }
  return {refresh};
}
