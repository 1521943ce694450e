// A worker process for the scenarios that kill or stop one.
//
//   child_worker.js crash|stall|graceful EVENTS GO
//
// crash: runs sdk-crash; its effect's sink records "sink <key>" in EVENTS and
//        then hangs, so the test can kill the process between effect and commit.
// stall: runs sdk-stall; records "started <id>", waits for the file GO, then
//        logs a line; a lost claim records "stale" and stops the handler, else
//        it resolves to {by: "first"}.
// graceful: runs sdk-graceful; records "started <id>", waits a second and
//        resolves to {finished: true}.
// At SIGTERM it stops and prints its stats as JSON.
import {appendFileSync, existsSync} from 'node:fs';

import {LeaseLost, Worker} from '../index.js';

const [mode, events, go] = process.argv.slice(2);
const record = (line) => appendFileSync(events, line + '\n');
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const worker = new Worker({queues: [`sdk-${mode}`], concurrency: 1, pollWaitMs: 1000});

worker.job('sdk-crash', async (ctx) => {
  await ctx.effect('charge-card', async (key) => {
    record(`sink ${key}`);
    await sleep(3600 * 1000);
  });
  return {charged: true};
});

worker.job('sdk-stall', async (ctx) => {
  record(`started ${ctx.id}`);
  while (!existsSync(go)) await sleep(20);
  try {
    await ctx.log('the first worker resumes');
  } catch (e) {
    if (e instanceof LeaseLost) record('stale');
    throw e;
  }
  return {by: 'first'};
});

worker.job('sdk-graceful', async (ctx) => {
  record(`started ${ctx.id}`);
  await sleep(1000);
  return {finished: true};
});

const stats = await worker.run();
worker.client.close();
console.log(JSON.stringify(stats));
