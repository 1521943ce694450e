// Formatting of times, durations and statuses for people.

export function time(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return d.toLocaleString(undefined, {dateStyle: 'short', timeStyle: 'medium'});
}

export function duration(ms) {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return ms + ' ms';
  const s = ms / 1000;
  if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + ' s';
  const m = s / 60;
  if (m < 60) return Math.floor(m) + ' min ' + Math.round(s % 60) + ' s';
  const hours = m / 60;
  if (hours < 48) return Math.floor(hours) + ' h ' + Math.round(m % 60) + ' min';
  return Math.floor(hours / 24) + ' d ' + Math.round(hours % 24) + ' h';
}

export function count(n) {
  return n === null || n === undefined ? '—' : Number(n).toLocaleString();
}

export const STATUSES = ['queued', 'running', 'succeeded', 'failed', 'quarantined', 'canceled',
                         'partially_canceled'];
export const TRIGGERS = ['scheduled', 'manual', 'api', 'retry', 'replay'];
export const TERMINAL = new Set(['succeeded', 'failed', 'quarantined', 'canceled',
                                 'partially_canceled']);

export function statusLabel(status) {
  return status ? status.replace('_', ' ') : '—';
}
