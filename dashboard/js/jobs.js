// Jobs: every definition with its schedule, next and last fire, skipped fires,
// failure notification targets and enabled flag; enable/disable with a
// reason; edit (job_form.js); "run now" with a JSON payload checked before it
// is sent.
import * as api from './api.js';
import {fill, h, table} from './dom.js';
import {count, statusLabel, TERMINAL, time} from './format.js';
import {jobEditor} from './job_form.js';
import {actionStatus, runAction} from './live.js';

// The payload as an object, or an error message.
export function parsePayload(text) {
  if (text.trim() === '') return {payload: {}};
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return {error: 'not JSON: ' + e.message};
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return {error: 'the payload must be a JSON object ({...})'};
  }
  return {payload: value};
}

export function jobs(ctx) {
  const status = actionStatus();
  const jobSelect = h('select', {id: 'run-job', name: 'job', required: true});
  const tenant = h('input', {id: 'run-tenant', name: 'tenant', size: 12, value: ctx.tenant || '',
                             readonly: ctx.tenant ? true : null});
  const payload = h('textarea', {id: 'run-payload', name: 'payload', rows: 5, cols: 50,
                                 spellcheck: 'false', 'aria-describedby': 'run-payload-check'}, '{}');
  const check = h('p', {id: 'run-payload-check', class: 'hint', 'aria-live': 'polite'});
  const submit = h('button', {type: 'submit'}, 'Run now');
  const validate = () => {
    const parsed = parsePayload(payload.value);
    fill(check, parsed.error ? 'Payload ' + parsed.error : 'Payload is a valid JSON object.');
    check.classList.toggle('invalid', Boolean(parsed.error));
    payload.setAttribute('aria-invalid', parsed.error ? 'true' : 'false');
    submit.disabled = Boolean(parsed.error);
    return parsed;
  };
  payload.addEventListener('input', validate);
  const form = h('form', {class: 'run-form', 'aria-labelledby': 'run-h'},
    h('h2', {id: 'run-h'}, 'Run a job now'),
    h('label', {for: 'run-job'}, 'Job'), jobSelect,
    h('label', {for: 'run-tenant'}, 'Tenant (per-tenant jobs)'), tenant,
    h('label', {for: 'run-payload'}, 'Payload (JSON object)'), payload, check,
    submit);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const parsed = validate();
    if (parsed.error) {
      payload.focus();
      return;
    }
    const body = {payload: parsed.payload};
    if (tenant.value.trim()) body.tenant = tenant.value.trim();
    const name = jobSelect.value;
    await runAction(status, 'Run of ' + name,
      () => api.mutate('POST', '/jobs/' + encodeURIComponent(name) + '/dispatch', body),
      async (reply) => {
        const e = await api.get('/executions/' + reply.id);
        const text = 'execution #' + reply.id + ' is ' + statusLabel(e.status);
        const link = {href: ctx.link('executions/' + reply.id), text: 'open #' + reply.id};
        return {done: TERMINAL.has(e.status), text, link};
      },
      (reply) => ({text: 'execution #' + reply.data.id + ' ' + statusLabel(reply.data.status),
                   link: {href: ctx.link('executions/' + reply.data.id), text: 'open #' + reply.data.id}}));
  });

  const error = h('p', {role: 'alert', class: 'error'});
  const list = h('section', {'aria-labelledby': 'jobs-h'});
  // Definitions change only for admins with every tenant (as the API says).
  const admin = ctx.can('admin') && ctx.allTenants;
  const editor = admin ? jobEditor(status) : null;
  const reason = h('input', {id: 'jobs-reason', name: 'reason', size: 40, maxlength: 1000});
  const reasonHint = h('p', {class: 'hint', 'aria-live': 'polite'});
  const reasonField = admin ? h('p', {},
    h('label', {for: 'jobs-reason'}, 'Reason for enable/disable (kept in the audit log; required to disable) '),
    reason, reasonHint) : null;
  fill(ctx.main, h('h1', {}, 'Jobs'), error, reasonField, list, editor ? editor.form : null,
       ctx.can('dispatch') ? [form, status] : status);
  let names = '';

  function toggle(job) {
    const enable = !job.enabled;
    const verb = enable ? 'enable' : 'disable';
    const why = reason.value.trim();
    if (!enable && why === '') {
      fill(reasonHint, 'Give a reason to disable ' + job.name + '.');
      reason.focus();
      return;
    }
    fill(reasonHint);
    runAction(status, (enable ? 'Enabling ' : 'Disabling ') + job.name,
      () => api.mutate('POST', '/jobs/' + encodeURIComponent(job.name) + '/' + verb,
                       why ? {reason: why} : {}),
      async () => {
        const now = await api.get('/jobs/' + encodeURIComponent(job.name));
        return now.enabled === enable ? {done: true, text: job.name + ' is ' + (enable ? 'enabled' : 'disabled')} : null;
      });
  }

  async function refresh() {
    let page;
    try {
      page = await api.get('/jobs');
      fill(error);
    } catch (e) {
      fill(error, e.message);
      throw e;
    }
    const items = page.items;
    const now = items.map((j) => j.name).join(',');
    if (now !== names) {  // keep the choice while the list is the same
      names = now;
      const chosen = jobSelect.value;
      fill(jobSelect, items.map((j) => h('option', {value: j.name, selected: j.name === chosen},
                                         j.name + (j.enabled ? '' : ' (disabled)'))));
    }
    fill(list, h('h2', {id: 'jobs-h'}, 'Definitions'),
      table('Job definitions', [
        {label: 'Job', cell: (j) => [h('strong', {}, j.name), j.display_name ? h('div', {class: 'hint'}, j.display_name) : null]},
        {label: 'Scope', cell: (j) => j.scope.replace('_', ' ')},
        {label: 'Queue', cell: (j) => j.queue},
        {label: 'Schedule', cell: (j) => j.schedule ? [h('code', {}, j.schedule), ' ', j.timezone] : 'on demand'},
        {label: 'Next fire', cell: (j) => j.schedule_error ? h('span', {class: 'error-text'}, j.schedule_error)
          : j.next_fire ? [time(j.next_fire), h('div', {class: 'hint'}, new Date(j.next_fire).toLocaleString(undefined, {timeZone: j.timezone, timeZoneName: 'short'}))] : '—'},
        {label: 'Last fire', cell: (j) => time(j.last_fire)},
        {label: 'Skipped', cell: (j) => count(j.skipped_fires), class: 'num'},
        {label: 'Notify on failure', cell: (j) => j.notify_on_failure === false ? 'no'
          : (j.notify_targets || []).length ? (j.notify_targets || []).join(', ') : 'server targets'},
        {label: 'Enabled', cell: (j) => [j.enabled ? 'yes' : 'no',
          admin ? [' ', h('button', {type: 'button', class: 'small', on: {click: () => toggle(j)},
                                                 'aria-label': (j.enabled ? 'Disable ' : 'Enable ') + j.name},
                                   j.enabled ? 'Disable' : 'Enable'),
                     ' ', h('button', {type: 'button', class: 'small', on: {click: () => editor.open(j)},
                                       'aria-label': 'Edit ' + j.name}, 'Edit…')] : null]},
        {label: 'Run', cell: (j) => ctx.can('dispatch') && j.enabled ? h('button', {type: 'button', class: 'small',
          'aria-label': 'Run now… ' + j.name, on: {click: () => {
            jobSelect.value = j.name;
            payload.focus();
          }}}, 'Run now…') : ''},
      ], items, 'No job is defined.'));
  }
  return {refresh};
}
