// Throughput of one Node worker process on no-op jobs over HTTP.
//
//   node bench/noop_worker.js JOBS CONCURRENCY
//
// Dispatches JOBS executions of sdk-noop (queue sdk-bench) in bulk with
// TASKENGINE_TOKEN, then runs one Worker (TASKENGINE_WORKER_TOKEN) until it
// has finished them and prints jobs/s. tests/clients/throughput.sh runs it.
import {Client, Worker} from '../index.js';

const [jobs, concurrency] = process.argv.slice(2).map(Number);
const admin = new Client();
for (let start = 0; start < jobs; start += 1000) {
  await admin.dispatchBulk(Array.from({length: Math.min(1000, jobs - start)}, () => ({job: 'sdk-noop'})));
}
admin.close();
const client = new Client({token: process.env.TASKENGINE_WORKER_TOKEN});
const worker = new Worker({client, queues: ['sdk-bench'], concurrency, maxJobs: jobs, pollWaitMs: 1000});
worker.job('sdk-noop', async () => null);
const began = performance.now();
const stats = await worker.run();
const seconds = (performance.now() - began) / 1000;
client.close();
if (stats.completed !== jobs) {
  console.error(`node: completed ${stats.completed} of ${jobs}: ${JSON.stringify(stats)}`);
  process.exit(1);
}
console.log(`node    ${jobs} no-op jobs, concurrency ${concurrency}: ${seconds.toFixed(2)} s, ` +
            `${(jobs / seconds).toFixed(0)} jobs/s`);
