<?php
// What the scenario tests share: the live server's address and tokens (set by
// tests/clients/run.sh) and waits that fail instead of hanging.
declare(strict_types=1);

namespace Taskengine\Tests;

use Taskengine\Client;
use Taskengine\Job;
use Taskengine\Worker;

final class Harness
{
    /** @var array<string, Client> */
    private static array $clients = [];

    public static function env(string $name): string
    {
        $value = getenv($name);
        if ($value === false || $value === '') {
            throw new \RuntimeException("{$name} is not set: run this test through tests/clients/run.sh php");
        }
        return $value;
    }

    /** @return list<array<string, mixed>> */
    public static function scenarios(): array
    {
        return json_decode(file_get_contents(self::env('TASKENGINE_TEST_SCENARIOS')), true,
            512, JSON_THROW_ON_ERROR)['scenarios'];
    }

    public static function client(string $tokenVariable): Client
    {
        return self::$clients[$tokenVariable] ??= new Client(self::env('TASKENGINE_SERVER'), self::env($tokenVariable));
    }

    public static function admin(): Client
    {
        return self::client('TASKENGINE_TOKEN');
    }

    public static function tenant(): Client
    {
        return self::client('TASKENGINE_TEST_TENANT_TOKEN');
    }

    /**
     * Runs a Worker of $queue in this process until it has handled $leases
     * leases, or for at most $timeout seconds (then it is stopped); returns its stats.
     *
     * @param array<string, Job> $jobs
     */
    public static function runWorker(string $queue, array $jobs, int $leases = 1, int $timeout = 30): array
    {
        $worker = new Worker(self::client('TASKENGINE_TEST_WORKER_TOKEN'), queues: [$queue], pollWait: 1.0,
            maxJobs: $leases, logger: static function (string $line): void {
            });
        foreach ($jobs as $name => $job) {
            $worker->register($name, $job);
        }
        $async = pcntl_async_signals(true);
        pcntl_signal(SIGALRM, static fn () => $worker->stop());
        pcntl_alarm($timeout);
        try {
            return $worker->run(handleSignals: false);
        } finally {
            pcntl_alarm(0);
            pcntl_signal(SIGALRM, SIG_DFL);
            pcntl_async_signals($async);
        }
    }

    public static function waitUntil(callable $done, string $what, float $timeout = 20.0): void
    {
        $deadline = microtime(true) + $timeout;
        while (!$done()) {
            if (microtime(true) > $deadline) {
                throw new \RuntimeException("timed out after {$timeout} s waiting for {$what}");
            }
            usleep(20000);
        }
    }

    public static function unique(string $prefix): string
    {
        return $prefix . '-' . bin2hex(random_bytes(6));
    }
}
