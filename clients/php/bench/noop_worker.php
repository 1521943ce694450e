<?php
// Throughput of one PHP worker process on no-op jobs over HTTP.
//
//   php bench/noop_worker.php JOBS CONCURRENCY
//
// Dispatches JOBS executions of sdk-noop (queue sdk-bench) in bulk with
// TASKENGINE_TOKEN, then runs one Worker (TASKENGINE_WORKER_TOKEN) until it has
// finished them and prints jobs/s. A PHP Worker runs one execution at a time,
// so CONCURRENCY must be 1. tests/clients/throughput.sh runs it.
declare(strict_types=1);

require __DIR__ . '/../autoload.php';

use Taskengine\Client;
use Taskengine\Job;
use Taskengine\JobContext;
use Taskengine\Worker;

[, $jobs] = array_map('intval', $argv);
$admin = new Client();
for ($start = 0; $start < $jobs; $start += 1000) {
    $admin->dispatchBulk(array_fill(0, min(1000, $jobs - $start), ['job' => 'sdk-noop']));
}
$worker = new Worker(new Client(token: getenv('TASKENGINE_WORKER_TOKEN')), queues: ['sdk-bench'], pollWait: 1.0,
    maxJobs: $jobs);
$worker->register('sdk-noop', new class implements Job {
    public function handle(JobContext $ctx, array $payload): mixed
    {
        return null;
    }
});
$began = microtime(true);
$stats = $worker->run();
$seconds = microtime(true) - $began;
if ($stats['completed'] !== $jobs) {
    fwrite(STDERR, "php: completed {$stats['completed']} of {$jobs}: " . json_encode($stats) . "\n");
    exit(1);
}
printf("php     %d no-op jobs, concurrency 1: %.2f s, %.0f jobs/s\n", $jobs, $seconds, $jobs / $seconds);
