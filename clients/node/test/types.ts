// Compiled (not run) by tests/clients/run.sh node with `tsc --noEmit --strict`:
// the example's code written against index.d.ts type-checks.
import {Client, IdempotencyConflict, JobContext, Worker, WorkerStats} from '../index.js';

async function dispatcher(): Promise<void> {
  const client = new Client({timeoutMs: 10000});
  try {
    const d = await client.dispatch('welcome-sms', {user: 42, phone: '+15550100'},
                                    {idempotencyKey: 'welcome-42', tenant: 'a', delayMs: 0});
    const execution = await client.wait(d.id, {timeoutMs: 60000});
    if (execution.status === 'succeeded') console.log(await client.result(d.id));
    const page = await client.list({job: 'welcome-sms', status: ['queued', 'running'], limit: 10});
    const next: string | null = page.nextCursor;
    for await (const e of client.executions({job: 'welcome-sms'})) console.log(e.id, e.status, next);
    const bulk = await client.dispatchBulk([{job: 'welcome-sms', payload: {user: 1}, runAt: new Date()}]);
    console.log(bulk[0].conflict, (await client.cancel(d.id, 'why')).cancel_requested,
                (await client.replay(d.id, 'fixed', {assume: 'done'})).outcome);
  } catch (e) {
    if (e instanceof IdempotencyConflict) console.log(e.existingExecutionId, e.httpStatus);
  } finally {
    client.close();
  }
}

async function worker(): Promise<WorkerStats> {
  const w = new Worker({queues: ['apps'], concurrency: 4, pollWaitMs: 1000});
  w.job<{user: number; phone: string}>('welcome-sms', async (ctx: JobContext, payload) => {
    await ctx.log(`welcoming user ${payload.user}`, 'info');
    const messageId: string = await ctx.effect('send-sms', async (key) => `sms-${key}`,
                                               {idempotent: true});
    ctx.progress(100);
    ctx.checkpoint();
    return {message_id: messageId};
  });
  return w.run({handleSignals: true});
}

void dispatcher;
void worker;
