// The job edit form (admins with every tenant, as PATCH /api/v1/jobs/{name}
// requires): display name, schedule and time zone with a live preview of the
// next fire times (GET /api/v1/schedule/preview, as the scheduler computes
// them), attempts, timeout, failure notifications and a reason for the audit
// log. Only the fields that changed are sent; the edit is shown confirmed
// once a read of the job returns the new values.
import * as api from './api.js';
import {fill, h} from './dom.js';
import {runAction} from './live.js';

const PREVIEW_DELAY_MS = 300;

// notify_targets as typed: one per line, blank lines dropped.
export function parseTargets(text) {
  return text.split('\n').map((t) => t.trim()).filter((t) => t !== '');
}

// An integer within [min, max], or an error message.
function parseInteger(text, min, max, what) {
  if (!/^[0-9]+$/.test(text.trim())) return {error: what + ' must be a whole number'};
  const n = Number(text.trim());
  if (n < min || n > max) return {error: what + ' must be between ' + min + ' and ' + max};
  return {value: n};
}

// The fields of the form that differ from `job`, or {error, field}.
export function changedFields(job, values) {
  const out = {};
  if (values.display_name !== job.display_name) out.display_name = values.display_name;
  const schedule = values.schedule.trim() === '' ? null : values.schedule.trim();
  if (schedule !== (job.schedule || null)) out.schedule = schedule;
  if (values.timezone.trim() !== job.timezone) out.timezone = values.timezone.trim();
  const attempts = parseInteger(values.max_attempts, 1, 1000, 'Max attempts');
  if (attempts.error) return {error: attempts.error, field: 'max_attempts'};
  if (attempts.value !== job.max_attempts) out.max_attempts = attempts.value;
  const timeout = parseInteger(values.timeout_s, 1, 7 * 86400, 'Timeout');
  if (timeout.error) return {error: timeout.error, field: 'timeout_s'};
  if (timeout.value * 1000 !== job.timeout_ms) out.timeout_ms = timeout.value * 1000;
  if (values.notify_on_failure !== job.notify_on_failure) {
    out.notify_on_failure = values.notify_on_failure;
  }
  const targets = parseTargets(values.notify_targets);
  if (JSON.stringify(targets) !== JSON.stringify(job.notify_targets || [])) {
    out.notify_targets = targets;
  }
  return {fields: out};
}

export function jobEditor(status) {
  const input = (id, attrs) => h('input', {id, name: id, ...attrs});
  const displayName = input('edit-display-name', {size: 30, maxlength: 200});
  const schedule = input('edit-schedule', {size: 24, maxlength: 200, spellcheck: 'false',
                                           'aria-describedby': 'edit-preview'});
  const timezone = input('edit-timezone', {size: 20, maxlength: 64, spellcheck: 'false',
                                           'aria-describedby': 'edit-preview'});
  const attempts = input('edit-max-attempts', {size: 5, inputmode: 'numeric'});
  const timeout = input('edit-timeout', {size: 8, inputmode: 'numeric'});
  const notify = input('edit-notify', {type: 'checkbox'});
  const targets = h('textarea', {id: 'edit-targets', name: 'edit-targets', rows: 3, cols: 40,
                                 spellcheck: 'false', 'aria-describedby': 'edit-targets-hint'});
  const reason = input('edit-reason', {size: 40, maxlength: 1000, required: true});
  const preview = h('div', {id: 'edit-preview', class: 'hint', 'aria-live': 'polite'});
  const check = h('p', {class: 'error', role: 'alert'});
  const heading = h('h2', {id: 'edit-h'}, 'Edit');
  const form = h('form', {class: 'edit-form', id: 'job-edit', 'aria-labelledby': 'edit-h', hidden: true},
    heading,
    h('label', {for: 'edit-display-name'}, 'Display name'), displayName,
    h('label', {for: 'edit-schedule'}, 'Schedule (cron; empty = on demand only)'), schedule,
    h('label', {for: 'edit-timezone'}, 'Time zone (IANA, e.g. Europe/Paris)'), timezone,
    h('p', {class: 'hint'}, 'Next fire times:'), preview,
    h('label', {for: 'edit-max-attempts'}, 'Max attempts'), attempts,
    h('label', {for: 'edit-timeout'}, 'Timeout (seconds)'), timeout,
    h('label', {for: 'edit-notify'}, notify, ' Notify on failure'),
    h('label', {for: 'edit-targets'}, 'Notify targets (one per line)'), targets,
    h('p', {id: 'edit-targets-hint', class: 'hint'},
      'An e-mail address, webhook:NAME or slack:NAME (an [[http_target]] of the server). ' +
      'None: the server\'s [notifications] targets.'),
    h('label', {for: 'edit-reason'}, 'Reason (kept in the audit log)'), reason,
    check,
    h('button', {type: 'submit'}, 'Save'), ' ',
    h('button', {type: 'button', class: 'small', on: {click: () => close()}}, 'Cancel'));

  let job = null;
  let timer = null;
  let asked = 0;

  async function showPreview() {
    const expr = schedule.value.trim();
    const zone = timezone.value.trim() || 'UTC';
    const ticket = ++asked;
    if (expr === '') {
      fill(preview, 'none: the job runs only when dispatched');
      return;
    }
    try {
      const p = await api.get('/schedule/preview', {schedule: expr, timezone: zone, count: 5});
      if (ticket !== asked) return;  // a later keystroke won
      fill(preview, p.fires.length === 0 ? 'it never fires'
        : h('ol', {class: 'fires'}, p.fires.map((f) => h('li', {},
          f.local + ' ' + f.abbrev + ' (' + f.utc + ')' + (f.shifted ? ' — shifted by a clock change' : '')))));
      schedule.setAttribute('aria-invalid', 'false');
    } catch (e) {
      if (ticket !== asked) return;
      fill(preview, h('span', {class: 'error-text'}, e.message));
      schedule.setAttribute('aria-invalid', 'true');
    }
  }
  const schedulePreview = () => {
    clearTimeout(timer);
    timer = setTimeout(showPreview, PREVIEW_DELAY_MS);
  };
  schedule.addEventListener('input', schedulePreview);
  timezone.addEventListener('input', schedulePreview);

  function close() {
    form.hidden = true;
    job = null;
  }

  function open(j) {
    job = j;
    fill(heading, 'Edit ' + j.name);
    displayName.value = j.display_name || '';
    schedule.value = j.schedule || '';
    timezone.value = j.timezone;
    attempts.value = String(j.max_attempts);
    timeout.value = String(Math.round(j.timeout_ms / 1000));
    notify.checked = j.notify_on_failure !== false;
    targets.value = (j.notify_targets || []).join('\n');
    reason.value = '';
    fill(check);
    form.hidden = false;
    showPreview();
    displayName.focus();
  }

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (!job) return;
    const diff = changedFields(job, {
      display_name: displayName.value, schedule: schedule.value, timezone: timezone.value,
      max_attempts: attempts.value, timeout_s: timeout.value, notify_on_failure: notify.checked,
      notify_targets: targets.value});
    if (diff.error) {
      fill(check, diff.error);
      return;
    }
    if (Object.keys(diff.fields).length === 0) {
      fill(check, 'Nothing changed.');
      return;
    }
    if (reason.value.trim() === '') {
      fill(check, 'A reason is required (it is kept in the audit log).');
      reason.focus();
      return;
    }
    fill(check);
    const name = job.name;
    const fields = diff.fields;
    const body = {...fields, reason: reason.value.trim()};
    const reply = await runAction(status, 'Edit of ' + name,
      () => api.mutate('PATCH', '/jobs/' + encodeURIComponent(name), body),
      async () => {
        const now = await api.get('/jobs/' + encodeURIComponent(name));
        const same = Object.entries(fields).every(([k, v]) => JSON.stringify(now[k]) === JSON.stringify(v));
        return same ? {done: true, text: name + ' saved: ' + Object.keys(fields).join(', ')} : null;
      });
    if (reply) close();
  });

  return {form, open};
}
