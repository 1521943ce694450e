// Live updates by bounded polling: the current page refreshes every 5 s, or
// every second while an action waits for confirmation; never while the tab is
// hidden (visibilitychange), and at once when it shows again.
//
// Actions show three states: "sending", "accepted" (the server answered 2xx)
// and "confirmed" (a later read saw the new state). An action is never shown
// done before the server confirms it.
import {fill, h} from './dom.js';

export const PAGE_INTERVAL_MS = 5000;
export const PENDING_INTERVAL_MS = 1000;
const PENDING_GIVE_UP_MS = 10 * 60 * 1000;

let refreshPage = null;  // () => Promise, the current page's refresh
let timer = null;
let running = false;
let again = false;
const pending = new Set();
let onTick = () => {};

export function setPage(refresh) {
  refreshPage = refresh;
  pending.clear();
  kick();
}

// Called after each round with the time of the last good read (or an error).
export function onRefreshed(fn) {
  onTick = fn;
}

// Refreshes now (the timer restarts after it).
export async function kick() {
  if (running) {
    again = true;
    return;
  }
  clearTimeout(timer);
  timer = null;
  if (document.hidden) return;
  running = true;
  let error = null;
  try {
    await Promise.all([refreshPage ? refreshPage() : null, checkPending()]);
  } catch (e) {
    error = e;
  }
  running = false;
  onTick(error);
  if (again) {
    again = false;
    return kick();
  }
  if (!document.hidden) {
    timer = setTimeout(kick, pending.size > 0 ? PENDING_INTERVAL_MS : PAGE_INTERVAL_MS);
  }
}

document.addEventListener('visibilitychange', () => {
  if (document.hidden) {
    clearTimeout(timer);
    timer = null;
  } else {
    kick();
  }
});

async function checkPending() {
  for (const p of [...pending]) {
    if (Date.now() - p.since > PENDING_GIVE_UP_MS) {
      show(p.el, 'unconfirmed', p.label + ': accepted, not confirmed yet — reload to check.');
      pending.delete(p);
      continue;
    }
    try {
      const seen = await p.confirm(p.accepted);
      if (!seen) continue;
      show(p.el, seen.done ? 'confirmed' : 'accepted', p.label + ': ' + seen.text, seen.link);
      if (seen.done) pending.delete(p);
    } catch (e) {
      show(p.el, 'accepted', p.label + ': accepted; checking failed: ' + e.message);
    }
  }
}

// The element an action reports in (a polite live region).
export function actionStatus() {
  return h('p', {class: 'action-status', role: 'status', 'aria-live': 'polite'});
}

function show(el, state, text, link) {
  el.dataset.state = state;
  const badge = h('span', {class: 'state state-' + state}, state);
  fill(el, badge, ' ', text, link ? [' ', h('a', {href: link.href, 'data-nav': ''}, link.text)] : null);
}

// Runs `request` (() => Promise<{status, data}>) and reports in `el`; then,
// until `confirm(data)` resolves {done: true, text}, polls it every second.
// `confirm` may return {done: false, text} to show progress, or null.
export async function runAction(el, label, request, confirm, describeAccepted) {
  show(el, 'sending', label + ': sending…');
  let reply;
  try {
    reply = await request();
  } catch (e) {
    show(el, 'refused', label + ': refused — ' + e.message);
    return null;
  }
  const accepted = describeAccepted ? describeAccepted(reply) : null;
  show(el, 'accepted', label + ': accepted (HTTP ' + reply.status + ')' +
       (accepted ? ' — ' + accepted.text : '') + '; waiting for confirmation…',
       accepted ? accepted.link : null);
  if (confirm) {
    pending.add({el, label, confirm, accepted: reply.data, since: Date.now()});
    kick();
  }
  return reply;
}
