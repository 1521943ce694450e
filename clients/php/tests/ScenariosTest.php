<?php
// The client conformance scenarios (clients/scenarios.json) against a live
// server: one test per scenario id; an id without an implementation here fails.
// Run through tests/clients/run.sh php (ctest clients_php_test).
declare(strict_types=1);

namespace Taskengine\Tests;

use PHPUnit\Framework\TestCase;
use Taskengine\Client;
use Taskengine\Exception\IdempotencyConflict;
use Taskengine\Exception\NotFound;
use Taskengine\Exception\Unauthenticated;
use Taskengine\Job;
use Taskengine\JobContext;
use Taskengine\Worker;

/** A job whose effect's sink records each call's key; returns [$resultKey => detail]. */
final class RecordingJob implements Job
{
    /** @var list<string> */
    public array $sunk = [];

    public function __construct(private string $effect, private string $resultKey, private string $detail,
                                private ?string $logLine = null)
    {
    }

    public function handle(JobContext $ctx, array $payload): mixed
    {
        $detail = $ctx->effect($this->effect, function (string $key): string {
            $this->sunk[] = $key;
            return $this->detail;
        });
        if ($this->logLine !== null) {
            $ctx->log($this->logLine);
            $ctx->progress(100);
        }
        return [$this->resultKey => $detail];
    }
}

final class ConstantJob implements Job
{
    public function __construct(private mixed $result)
    {
    }

    public function handle(JobContext $ctx, array $payload): mixed
    {
        return $this->result;
    }
}

/** Sets progress 50, blocks for $blockMs (usleep), returns how long. */
final class BlockingJob implements Job
{
    public function __construct(private int $blockMs)
    {
    }

    public function handle(JobContext $ctx, array $payload): mixed
    {
        $ctx->progress(50);
        usleep($this->blockMs * 1000);
        return ['slept_ms' => $this->blockMs];
    }
}

final class ScenariosTest extends TestCase
{
    /** @return iterable<string, array{array<string, mixed>}> */
    public static function scenarios(): iterable
    {
        foreach (Harness::scenarios() as $scenario) {
            yield $scenario['id'] => [$scenario];
        }
    }

    /** @dataProvider scenarios */
    public function testScenario(array $s): void
    {
        $method = lcfirst(str_replace('_', '', ucwords($s['id'], '_')));
        if (!method_exists($this, $method)) {
            $this->fail("scenario {$s['id']} ({$s['title']}) is not implemented by the PHP client's tests");
        }
        $this->{$method}($s);
    }

    private function dispatchIdempotency(array $s): void
    {
        $client = Harness::admin();
        $key = Harness::unique('php-key');
        $first = $client->dispatch($s['job'], ['n' => 1], idempotencyKey: $key);
        $this->assertTrue($first->created);
        $this->assertSame('queued', $first->status);
        $this->assertSame("/api/v1/executions/{$first->id}", $first->statusUrl);
        $again = $client->dispatch($s['job'], ['n' => 1], idempotencyKey: $key);
        $this->assertSame([$first->id, false], [$again->id, $again->created]);
        try {
            $client->dispatch($s['job'], ['n' => 2], idempotencyKey: $key);
            $this->fail('a conflicting dispatch was accepted');
        } catch (IdempotencyConflict $e) {
            $this->assertSame(409, $e->httpStatus);
            $this->assertSame($first->id, $e->existingExecutionId());
        }

        $bulk = $client->dispatchBulk([
            ['job' => $s['job'], 'payload' => ['n' => 1], 'idempotency_key' => $key],
            ['job' => $s['job'], 'payload' => ['n' => 2], 'idempotency_key' => $key],
            ['job' => $s['job'], 'payload' => ['n' => 3], 'idempotency_key' => Harness::unique('php-key'),
                'delay_ms' => 60000, 'lane' => 'php-lane'],
        ]);
        $this->assertSame([[$first->id, false, false], [$first->id, false, true]],
            array_map(static fn ($r) => [$r->id, $r->created, $r->conflict], array_slice($bulk, 0, 2)));
        $this->assertTrue($bulk[2]->created);
        $this->assertNotSame($first->id, $bulk[2]->id);
        $this->assertSame('php-lane', $client->get($bulk[2]->id)['lane_key']);

        $runAt = new \DateTimeImmutable('+1 hour', new \DateTimeZone('UTC'));
        $later = $client->dispatch($s['job'], ['n' => 4], runAt: $runAt);
        $execution = $client->get($later->id);
        $this->assertSame('queued', $execution['status']);
        $this->assertStringStartsWith($runAt->format('Y-m-d\TH:i'), $execution['run_at']);
    }

    private function listPagination(array $s): void
    {
        $client = Harness::admin();
        $ids = [];
        for ($i = 0; $i < $s['count']; $i++) {
            $ids[] = $client->dispatch($s['job'], ['i' => $i])->id;
        }
        $seen = [];
        $cursor = null;
        do {
            $page = $client->list(job: $s['job'], status: ['queued'], limit: $s['page_size'], cursor: $cursor);
            $this->assertLessThanOrEqual($s['page_size'], count($page->items));
            foreach ($page->items as $item) {
                $seen[] = (string) $item['id'];
            }
            $cursor = $page->nextCursor;
        } while ($cursor !== null);
        $expected = $ids;
        usort($expected, static fn ($a, $b) => (int) $b <=> (int) $a);
        $this->assertSame($expected, $seen);
        $all = [];
        foreach ($client->executions(job: $s['job'], limit: 2) as $execution) {
            $all[] = (string) $execution['id'];
        }
        $this->assertSame($seen, $all);
    }

    private function effectCompletes(array $s): void
    {
        $client = Harness::admin();
        $d = $client->dispatch($s['job'], ['to' => '+15550100']);
        $job = new RecordingJob($s['effect'], 'sms', 'sms-1', 'sms sent');
        $stats = Harness::runWorker($s['queue'], [$s['job'] => $job]);
        $this->assertSame(1, $stats['completed'], json_encode($stats));
        $execution = $client->wait($d->id, timeout: 20);
        $this->assertSame('succeeded', $execution['status'], json_encode($execution));
        $this->assertSame(['sms' => 'sms-1'], $client->result($d->id));
        $key = "{$d->id}:{$s['effect']}";
        $this->assertSame([$key], $job->sunk);
        $this->assertSame([[$s['effect'], $key, 'committed', 'sms-1']],
            array_map(static fn ($e) => [$e['name'], $e['key'], $e['state'], $e['detail']], $execution['effects']));
        $this->assertContains('sms sent', array_column($execution['logs'], 'message'));
    }

    private function crashBetweenEffectAndCommit(array $s): void
    {
        $client = Harness::admin();
        $d = $client->dispatch($s['job'], ['amount' => 42]);
        $child = new ChildWorker('crash');
        try {
            $child->waitForEvent('sink ');
        } finally {
            $child->kill();
        }
        $job = new RecordingJob($s['effect'], 'charged', 'charge-2');
        Harness::runWorker($s['queue'], [$s['job'] => $job]);
        $execution = $client->wait($d->id, timeout: 30);
        $this->assertSame('quarantined', $execution['status'], json_encode($execution));
        $this->assertSame('ambiguous', $execution['failure_class']);
        $this->assertSame([], $job->sunk);
        $this->assertSame(["sink {$d->id}:{$s['effect']}"], $child->lines());
        $this->assertSame([[$s['effect'], 'reserved']],
            array_map(static fn ($e) => [$e['name'], $e['state']], $execution['effects']));

        $replay = $client->replay($d->id, 'the card gateway shows the charge', assume: 'done');
        $this->assertSame('replayed', $replay['outcome']);
        Harness::runWorker($s['queue'], [$s['job'] => $job]);
        $execution = $client->wait($d->id, timeout: 20);
        $this->assertSame('succeeded', $execution['status'], json_encode($execution));
        $this->assertSame([], $job->sunk);
        $this->assertCount(1, $child->lines());
    }

    private function stoppedWorkerIsStale(array $s): void
    {
        $client = Harness::admin();
        $d = $client->dispatch($s['job']);
        $child = new ChildWorker('stall');
        try {
            $this->assertSame("started {$d->id}", $child->waitForEvent('started '));
            $child->signal(SIGSTOP);
            Harness::runWorker($s['queue'], [$s['job'] => new ConstantJob(['by' => 'second'])]);
            $execution = $client->wait($d->id, timeout: 30);
            $this->assertSame('succeeded', $execution['status'], json_encode($execution));
            $child->signal(SIGCONT);
            touch($child->go);
            $child->waitForEvent('stale');
            $stats = $child->finish();
        } finally {
            $child->kill();
        }
        $this->assertSame([1, 0], [$stats['lost'], $stats['completed']], json_encode($stats));
        $this->assertSame(['by' => 'second'], $client->result($d->id));
        $this->assertSame('succeeded', $client->status($d->id));
    }

    private function longHandlerKeepsLease(array $s): void
    {
        $client = Harness::admin();
        $d = $client->dispatch($s['job']);
        Harness::runWorker($s['queue'], [$s['job'] => new BlockingJob($s['block_ms'])]);
        $execution = $client->wait($d->id, timeout: 20);
        $this->assertSame(['succeeded', 1], [$execution['status'], $execution['attempt']], json_encode($execution));
        $this->assertSame(0, $execution['consecutive_lease_expiries']);
        $this->assertSame(['slept_ms' => $s['block_ms']], $client->result($d->id));
    }

    private function sigtermFinishesRunningHandler(array $s): void
    {
        $client = Harness::admin();
        $d = $client->dispatch($s['job']);
        $child = new ChildWorker('graceful');
        try {
            $this->assertSame("started {$d->id}", $child->waitForEvent('started '));
            $stats = $child->finish();
        } finally {
            $child->kill();
        }
        $this->assertSame([1, 1], [$stats['completed'], $stats['leased']], json_encode($stats));
        $execution = $client->get($d->id);
        $this->assertSame(['succeeded', 1], [$execution['status'], $execution['attempt']], json_encode($execution));
        $this->assertSame(['finished' => true], $client->result($d->id));
    }

    private function cancelSeenByHandler(array $s): void
    {
        $client = Harness::admin();
        $d = $client->dispatch($s['job']);
        $child = new ChildWorker('cancel');
        try {
            $this->assertSame("started {$d->id}", $child->waitForEvent('started '));
            $answer = $client->cancel($d->id, 'the customer withdrew');
            $this->assertTrue($answer['cancel_requested'], json_encode($answer));
            $execution = $client->wait($d->id, timeout: 20);
            $child->waitForEvent('canceled');
        } finally {
            $child->kill();
        }
        $this->assertSame('canceled', $execution['status'], json_encode($execution));
    }

    private function badToken401(array $s): void
    {
        $bad = new Client(Harness::env('TASKENGINE_SERVER'), 'te_not_a_token');
        foreach ([fn () => $bad->get('1'), fn () => $bad->dispatch('sdk-echo')] as $call) {
            try {
                $call();
                $this->fail('a bad token was accepted');
            } catch (Unauthenticated $e) {
                $this->assertSame(401, $e->httpStatus);
            }
        }
        $worker = new Worker($bad, queues: ['sdk-idle'], pollWait: 0.5, logger: static function (string $l): void {
        });
        $worker->register('sdk-echo', new ConstantJob(null));
        $this->expectException(Unauthenticated::class);
        $worker->run(handleSignals: false);
    }

    private function otherTenant404(array $s): void
    {
        $theirs = Harness::admin()->dispatch($s['job'], ['store' => 2], tenant: 'b');
        $mine = Harness::tenant();
        foreach ([$theirs->id, '987654321'] as $id) {
            foreach ([fn () => $mine->get($id), fn () => $mine->cancel($id), fn () => $mine->result($id)] as $call) {
                try {
                    $call();
                    $this->fail("another tenant's execution {$id} was visible");
                } catch (NotFound $e) {
                    $this->assertSame(404, $e->httpStatus);
                }
            }
        }
        $own = $mine->dispatch($s['job'], ['store' => 1], tenant: 'a');
        $this->assertSame('a', $mine->get($own->id)['tenant']);
    }

    private function examplesRun(array $s): void
    {
        $examples = dirname(__DIR__) . '/examples';
        $env = getenv();
        $env['TASKENGINE_TOKEN'] = Harness::env('TASKENGINE_TEST_WORKER_TOKEN');
        $worker = proc_open([PHP_BINARY, "{$examples}/worker.php"], [0 => ['file', '/dev/null', 'r'],
            1 => ['pipe', 'w'], 2 => ['redirect', 1]], $pipes, null, $env);
        $outputs = [];
        try {
            for ($i = 0; $i < 2; $i++) {
                exec(escapeshellarg(PHP_BINARY) . ' ' . escapeshellarg("{$examples}/dispatcher.php") . ' 2>&1',
                    $lines, $code);
                $out = implode("\n", $lines);
                $lines = [];
                $this->assertSame(0, $code, $out);
                $outputs[] = $out;
            }
        } finally {
            posix_kill(proc_get_status($worker)['pid'], SIGTERM);
            $workerOut = stream_get_contents($pipes[1]);
            fclose($pipes[1]);
            $workerCode = proc_close($worker);
        }
        $this->assertStringContainsString('created', $outputs[0]);
        $this->assertStringContainsString('already dispatched', $outputs[1]);
        foreach ($outputs as $out) {
            $this->assertStringContainsString('succeeded', $out);
            $this->assertStringContainsString('message_id', $out);
        }
        $this->assertSame(0, $workerCode, $workerOut);
        $this->assertSame(1, substr_count($workerOut, 'SMS to +15550100'), $workerOut);
    }
}
