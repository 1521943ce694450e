<?php
// A worker process for the scenarios that kill, stop or cancel one.
//
//   scenario_worker.php crash|stall|cancel|graceful EVENTS GO
//
// crash:  runs sdk-crash; its effect's sink records "sink <key>" in EVENTS and
//         then hangs, so the test can kill the process between effect and commit.
// stall:  runs sdk-stall; records "started <id>", waits for the file GO, then
//         logs a line; a lost claim records "stale" and stops the handler, else
//         it returns {"by": "first"}.
// cancel: runs sdk-cancel; records "started <id>", then checkpoints every 20 ms
//         and records "canceled" when one stops it.
// graceful: runs sdk-graceful; records "started <id>", blocks for a second and
//         returns {"finished": true}.
// At SIGTERM it stops and prints its stats as JSON.
declare(strict_types=1);

require __DIR__ . '/../autoload.php';

use Taskengine\Exception\Canceled;
use Taskengine\Exception\LeaseLost;
use Taskengine\Job;
use Taskengine\JobContext;
use Taskengine\Worker;

[, $mode, $events, $go] = $argv;
$record = static fn (string $line) => file_put_contents($events, $line . "\n", FILE_APPEND);

$worker = new Worker(queues: ["sdk-{$mode}"], pollWait: 1.0);
$worker->register('sdk-crash', new class ($record) implements Job {
    public function __construct(private \Closure $record)
    {
    }

    public function handle(JobContext $ctx, array $payload): mixed
    {
        $ctx->effect('charge-card', function (string $key): string {
            ($this->record)("sink {$key}");
            sleep(3600);
            return 'never';
        });
        return ['charged' => true];
    }
});
$worker->register('sdk-stall', new class ($record, $go) implements Job {
    public function __construct(private \Closure $record, private string $go)
    {
    }

    public function handle(JobContext $ctx, array $payload): mixed
    {
        ($this->record)("started {$ctx->id()}");
        while (!is_file($this->go)) {
            usleep(20000);
        }
        try {
            $ctx->log('the first worker resumes');
        } catch (LeaseLost $e) {
            ($this->record)('stale');
            throw $e;
        }
        return ['by' => 'first'];
    }
});
$worker->register('sdk-cancel', new class ($record) implements Job {
    public function __construct(private \Closure $record)
    {
    }

    public function handle(JobContext $ctx, array $payload): mixed
    {
        ($this->record)("started {$ctx->id()}");
        $deadline = microtime(true) + 20;
        while (microtime(true) < $deadline) {
            try {
                $ctx->checkpoint();
            } catch (Canceled $e) {
                ($this->record)('canceled');
                throw $e;
            }
            usleep(20000);
        }
        return ['cancel' => 'never seen'];
    }
});

$worker->register('sdk-graceful', new class ($record) implements Job {
    public function __construct(private \Closure $record)
    {
    }

    public function handle(JobContext $ctx, array $payload): mixed
    {
        ($this->record)("started {$ctx->id()}");
        $until = microtime(true) + 1;
        while (microtime(true) < $until) {  // a signal cuts usleep short: sleep until the deadline
            usleep(20000);
        }
        return ['finished' => true];
    }
});

echo json_encode($worker->run()), "\n";
