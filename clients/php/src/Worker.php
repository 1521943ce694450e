<?php
declare(strict_types=1);

namespace Taskengine;

use Taskengine\Exception\ApiException;
use Taskengine\Exception\Canceled;
use Taskengine\Exception\EffectAmbiguous;
use Taskengine\Exception\LeaseLost;
use Taskengine\Exception\PermanentError;
use Taskengine\Exception\RetryableError;
use Taskengine\Exception\TaskengineException;
use Taskengine\Exception\TransportException;

/**
 * Runs one Job class per job name for leased executions, one at a time (run
 * more processes for more at once).
 *
 *     $worker = new Worker(queues: ['mail']);
 *     $worker->register('send-welcome', SendWelcome::class);  // SendWelcome implements Job
 *     $worker->run();   // until SIGTERM/SIGINT or stop()
 *
 * What run does, as the C++ SDK's Worker (clients/cpp/README.md):
 * - leases one execution at a time with a long poll, with confirm_start: it
 *   confirms the start in one batch heartbeat and runs only what the server
 *   confirmed, so a lease it never received costs no attempt (L4);
 * - heartbeats the running lease every lease/3 from a process of its own
 *   (HeartbeatSidecar), which learns cancel requests and lost claims; the
 *   handler sees them at $ctx->checkpoint(), $ctx->effect() and $ctx->progress();
 * - reports the outcome: complete with handle()'s result, fail with a class, or
 *   release; a finish is retried while the server is away ($finishRetryFor) and
 *   dropped when the claim turns out stale;
 * - rides out a server that is down (backoff with jitter); a refused token
 *   (401/403 on lease) makes run throw that ApiException;
 * - stop() (SIGTERM/SIGINT with the pcntl extension): no more leasing, the open
 *   long poll is aborted, a lease not yet started is released, the running
 *   handler finishes and is reported, then run returns.
 * A job without a registered class fails retryable, naming the job.
 */
final class Worker
{
    public readonly Client $client;
    public readonly string $workerId;
    /** @var array<string, Job> */
    private array $jobs = [];
    private bool $stopping = false;
    /** @var array{leased: int, completed: int, failed: int, released: int, lost: int, reconnects: int} */
    private array $stats = ['leased' => 0, 'completed' => 0, 'failed' => 0, 'released' => 0, 'lost' => 0,
        'reconnects' => 0];
    /** @var resource|null */
    private $sidecar = null;
    /** @var array<int, resource> */
    private array $sidecarPipes = [];
    private string $sidecarBuffer = '';
    /** @var \Closure(string): void */
    private \Closure $logger;

    /**
     * @param list<string> $queues in priority order
     * @param float $pollWait the lease long poll, seconds (at most 30)
     * @param int $maxJobs run returns after this many leases (0 = never)
     * @param null|callable(string): void $logger one line each; default STDERR
     */
    public function __construct(
        ?Client $client = null,
        public readonly array $queues = ['default'],
        ?string $workerId = null,
        public readonly string $name = '',
        public readonly float $pollWait = 30.0,
        public readonly int $maxJobs = 0,
        public readonly float $idleHeartbeat = 10.0,
        public readonly float $reconnectMin = 0.1,
        public readonly float $reconnectMax = 5.0,
        public readonly float $finishRetryFor = 300.0,
        ?callable $logger = null,
    ) {
        $this->client = $client ?? new Client();
        $this->workerId = $workerId ?? ((gethostname() ?: 'worker') . ':' . getmypid());
        $this->logger = $logger !== null ? \Closure::fromCallable($logger)
            : fn (string $line) => fwrite(STDERR, "taskengine worker {$this->workerId}: {$line}\n");
    }

    /**
     * Registers the handler of job $name: a Job instance, or a Job class name
     * (constructed without arguments). Chainable.
     *
     * @param Job|class-string<Job> $job
     */
    public function register(string $name, Job|string $job): self
    {
        if (isset($this->jobs[$name])) {
            throw new \InvalidArgumentException("job {$name} already has a handler");
        }
        $this->jobs[$name] = is_string($job) ? new $job() : $job;
        return $this;
    }

    /** @return array{leased: int, completed: int, failed: int, released: int, lost: int, reconnects: int} */
    public function stats(): array
    {
        return $this->stats;
    }

    /** Graceful stop (see the class comment); safe in a signal handler. */
    public function stop(): void
    {
        $this->stopping = true;
    }

    /**
     * Leases and runs until stop() or $maxJobs; returns the stats. Throws the
     * ApiException that made it give up (401/403 on lease).
     */
    public function run(bool $handleSignals = true): array
    {
        if ($this->jobs === []) {
            throw new \LogicException('no jobs registered (use $worker->register(name, JobClass::class))');
        }
        $signals = $handleSignals && function_exists('pcntl_signal');
        if ($signals) {
            $async = pcntl_async_signals(true);
            $previous = [SIGTERM => pcntl_signal_get_handler(SIGTERM), SIGINT => pcntl_signal_get_handler(SIGINT)];
            foreach ([SIGTERM, SIGINT] as $signal) {
                pcntl_signal($signal, fn () => $this->stop());
            }
        }
        $this->startSidecar();
        try {
            $this->leaseLoop();
        } finally {
            $this->stopSidecar();
            if ($signals) {
                foreach ($previous as $signal => $handler) {
                    pcntl_signal($signal, $handler);
                }
                pcntl_async_signals($async);
            }
        }
        return $this->stats;
    }

    private function leaseLoop(): void
    {
        $backoff = $this->reconnectMin;
        $lastError = '';
        while (!$this->stopping) {
            if ($this->maxJobs > 0 && $this->stats['leased'] >= $this->maxJobs) {
                return;
            }
            try {
                $leases = $this->client->lease($this->workerId, $this->queues, 1,
                    (int) (max(0.0, min($this->pollWait, 30.0)) * 1000),
                    ['name' => $this->name, 'host' => gethostname() ?: '', 'pid' => getmypid(),
                        'version' => 'taskengine-php/' . Client::VERSION, 'concurrency' => 1, 'confirm_start' => true],
                    fn (): bool => $this->stopping);
            } catch (TaskengineException $e) {
                if ($this->stopping) {
                    return;
                }
                if ($e instanceof ApiException && in_array($e->httpStatus, [401, 403], true)) {
                    ($this->logger)("lease refused: {$e->getMessage()}");
                    throw $e;
                }
                $this->stats['reconnects']++;
                if ($e->getMessage() !== $lastError) {
                    ($this->logger)("cannot lease ({$e->getMessage()}); retrying with backoff");
                }
                $lastError = $e->getMessage();
                $this->sleepUnlessStopping($backoff + mt_rand() / mt_getrandmax() * $backoff / 2);
                $backoff = min($backoff * 2, $this->reconnectMax);
                continue;
            }
            if ($lastError !== '') {
                ($this->logger)('server reachable again');
            }
            $lastError = '';
            $backoff = $this->reconnectMin;
            foreach ($this->confirmStarts($leases) as $lease) {
                $this->stats['leased']++;
                $ctx = new JobContext($this->client, $lease, fn (JobContext $c) => $this->poll($c));
                if ($this->stopping) {
                    $this->report($ctx, ['kind' => 'release']);  // not started: another worker runs it now
                    continue;
                }
                $this->tellSidecar(['op' => 'hold', 'id' => $lease->id, 'claim_version' => $lease->claimVersion,
                    'lease_ms' => $lease->leaseMs]);
                $this->report($ctx, $this->runOne($ctx));
            }
        }
    }

    /**
     * @param list<Lease> $leases
     * @return list<Lease> those the server confirmed
     */
    private function confirmStarts(array $leases): array
    {
        if ($leases === []) {
            return [];
        }
        $items = array_map(static fn (Lease $l) => ['id' => $l->id, 'claim_version' => $l->claimVersion,
            'started' => true], $leases);
        $confirmed = [];
        try {
            $answers = $this->client->heartbeats($this->workerId, $items,
                $this->stats['completed'] + $this->stats['failed'], $this->stats['failed']);
            if (count($answers) === count($leases)) {
                foreach ($leases as $i => $lease) {
                    if ($answers[$i]['ok'] ?? false) {
                        $confirmed[] = $lease;
                    }
                }
            } else {
                ($this->logger)('could not confirm the start of ' . count($leases) . ' lease(s): unexpected answer');
            }
        } catch (TaskengineException $e) {
            // Unconfirmed leases lapse and, never started, are requeued at no attempt's cost.
            ($this->logger)('could not confirm the start of ' . count($leases) . " lease(s): {$e->getMessage()}");
        }
        $dropped = count($leases) - count($confirmed);
        $this->stats['leased'] += $dropped;
        $this->stats['lost'] += $dropped;
        return $confirmed;
    }

    /** @return array{kind: string, result?: mixed, class?: string, error?: string, retry_after_ms?: int} */
    private function runOne(JobContext $ctx): array
    {
        $job = $this->jobs[$ctx->job()] ?? null;
        if ($job === null) {
            $known = array_keys($this->jobs);
            sort($known);
            return ['kind' => 'fail', 'class' => 'retryable', 'error' => "no handler for job {$ctx->job()} on worker "
                . "{$this->workerId} (it runs: " . implode(', ', $known) . ')'];
        }
        try {
            return ['kind' => 'complete', 'result' => $job->handle($ctx, $ctx->lease->payload)];
        } catch (Canceled) {
            return ['kind' => 'release'];  // released while cancel is requested: ends canceled
        } catch (LeaseLost) {
            $ctx->lost = true;
            return ['kind' => 'release'];
        } catch (EffectAmbiguous $e) {
            return ['kind' => 'fail', 'class' => 'ambiguous', 'error' => $e->getMessage()];
        } catch (PermanentError $e) {
            return ['kind' => 'fail', 'class' => 'permanent', 'error' => $e->getMessage()];
        } catch (RetryableError $e) {
            return ['kind' => 'fail', 'class' => 'retryable', 'error' => $e->getMessage(),
                'retry_after_ms' => $e->retryAfterMs];
        } catch (\Throwable $e) {
            ($this->logger)("handler of job {$ctx->job()} threw " . get_class($e) . ": {$e->getMessage()}");
            return ['kind' => 'fail', 'class' => 'retryable', 'error' => get_class($e) . ': ' . $e->getMessage()];
        }
    }

    private function report(JobContext $ctx, array $outcome): void
    {
        $this->poll($ctx);
        $lost = $ctx->lost;
        if (!$lost) {
            $body = ['claim_version' => $ctx->claimVersion()];
            if ($outcome['kind'] === 'complete' && ($outcome['result'] ?? null) !== null) {
                $body['result'] = $outcome['result'];
            } elseif ($outcome['kind'] === 'fail') {
                $body += ['class' => $outcome['class'], 'error' => $outcome['error'],
                    'retry_after_ms' => $outcome['retry_after_ms'] ?? 0];
            }
            if ($outcome['kind'] !== 'complete' && ($progress = $ctx->takeProgress()) !== null) {
                try {
                    $this->client->workerCall($ctx->id(), 'heartbeat',
                        ['claim_version' => $ctx->claimVersion(), 'progress' => $progress]);
                } catch (TaskengineException) {
                }
            }
            $deadline = microtime(true) + $this->finishRetryFor;
            $backoff = $this->reconnectMin;
            while (true) {
                try {
                    $this->client->workerCall($ctx->id(), $outcome['kind'], $body);
                    break;
                } catch (ApiException $e) {
                    if (in_array($e->apiCode, ['stale', 'not_found'], true)) {
                        $lost = true;
                        break;
                    }
                    if (!$e->isRetryable() || microtime(true) >= $deadline) {
                        ($this->logger)("could not report execution {$ctx->id()}: {$e->getMessage()}");
                        $lost = true;
                        break;
                    }
                } catch (TransportException $e) {
                    if (microtime(true) >= $deadline) {
                        ($this->logger)("could not report execution {$ctx->id()}: {$e->getMessage()}");
                        $lost = true;
                        break;
                    }
                }
                usleep((int) ($backoff * 1e6));
                $backoff = min($backoff * 2, $this->reconnectMax);
            }
        }
        $key = match (true) {
            $lost => 'lost',
            $outcome['kind'] === 'complete' => 'completed',
            $outcome['kind'] === 'fail' => 'failed',
            default => 'released',
        };
        $this->stats[$key]++;
        $this->tellSidecar(['op' => 'drop', 'id' => $ctx->id(), 'claim_version' => $ctx->claimVersion(),
            'processed' => $this->stats['completed'] + $this->stats['failed'], 'failed' => $this->stats['failed']]);
    }

    /** Applies what the sidecar learned and hands it the handler's progress. */
    private function poll(JobContext $ctx): void
    {
        if (($progress = $ctx->takeProgress()) !== null) {
            $this->tellSidecar(['op' => 'progress', 'id' => $ctx->id(), 'claim_version' => $ctx->claimVersion(),
                'progress' => $progress]);
        }
        $out = $this->sidecarPipes[1] ?? null;
        if ($out === null) {
            return;
        }
        while (($chunk = fread($out, 65536)) !== false && $chunk !== '') {
            $this->sidecarBuffer .= $chunk;
        }
        while (($newline = strpos($this->sidecarBuffer, "\n")) !== false) {
            $news = json_decode(substr($this->sidecarBuffer, 0, $newline), true) ?? [];
            $this->sidecarBuffer = substr($this->sidecarBuffer, $newline + 1);
            if (($news['id'] ?? null) === $ctx->id() && ($news['claim_version'] ?? null) === $ctx->claimVersion()) {
                $ctx->apply(($news['lost'] ?? false) ? ['ok' => false, 'error' => ['code' => 'stale']]
                    : ['ok' => true, 'cancel_requested' => true]);
            }
        }
    }

    private function startSidecar(): void
    {
        $script = dirname(__DIR__) . '/bin/heartbeat-sidecar.php';
        $this->sidecar = proc_open([PHP_BINARY, $script, (string) getmypid()],
            [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => STDERR], $this->sidecarPipes);
        if (!is_resource($this->sidecar)) {
            throw new \RuntimeException("cannot start the heartbeat process {$script}");
        }
        stream_set_blocking($this->sidecarPipes[1], false);
        $this->tellSidecar(['op' => 'config', 'server' => $this->client->server, 'token' => $this->client->token(),
            'worker_id' => $this->workerId, 'idle_ms' => (int) ($this->idleHeartbeat * 1000)]);
    }

    private function stopSidecar(): void
    {
        if ($this->sidecar === null) {
            return;
        }
        foreach ($this->sidecarPipes as $pipe) {
            fclose($pipe);
        }
        proc_close($this->sidecar);
        $this->sidecar = null;
        $this->sidecarPipes = [];
    }

    private function tellSidecar(array $message): void
    {
        if (isset($this->sidecarPipes[0])) {
            @fwrite($this->sidecarPipes[0], json_encode($message, JSON_UNESCAPED_SLASHES) . "\n");
        }
    }

    private function sleepUnlessStopping(float $seconds): void
    {
        $until = microtime(true) + $seconds;
        while (!$this->stopping && microtime(true) < $until) {
            usleep((int) (min(0.05, $until - microtime(true)) * 1e6));
        }
    }
}
