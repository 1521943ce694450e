// The example worker: sends each user's welcome SMS exactly once.
//
//   TASKENGINE_SERVER=http://127.0.0.1:8080 TASKENGINE_TOKEN=<worker token> node examples/worker.js
//
// Leases executions of the queue "apps" (docs/clients.md shows the server's
// configuration); SIGTERM or Ctrl-C stops it gracefully.
import {createHash} from 'node:crypto';

import {Worker} from '../index.js';

// A stand-in for an SMS gateway that deduplicates by a key: the message id.
async function sendSms(phone, text, dedupKey) {
  console.log(`SMS to ${phone}: ${text}`);
  return 'sms-' + createHash('sha256').update(dedupKey).digest('hex').slice(0, 12);
}

const worker = new Worker({queues: ['apps'], concurrency: 4});

worker.job('welcome-sms', async (ctx, payload) => {
  await ctx.log(`welcoming user ${payload.user}`);
  const messageId = await ctx.effect(
    'send-sms',
    (key) => sendSms(payload.phone, 'Welcome aboard!', key),
    {idempotent: true});  // the gateway deduplicates by the effect key
  ctx.progress(100);
  return {message_id: messageId};
});

console.log(await worker.run());
worker.client.close();
