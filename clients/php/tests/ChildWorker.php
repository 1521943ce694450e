<?php
// tests/scenario_worker.php MODE in a child process, with its event file.
declare(strict_types=1);

namespace Taskengine\Tests;

final class ChildWorker
{
    public readonly string $events;
    public readonly string $go;
    public readonly int $pid;
    /** @var resource */
    private $process;
    /** @var array<int, resource> */
    private array $pipes = [];

    public function __construct(string $mode)
    {
        $name = Harness::unique($mode);
        $this->events = Harness::env('TASKENGINE_TEST_WORK') . "/php-{$name}.events";
        $this->go = Harness::env('TASKENGINE_TEST_WORK') . "/php-{$name}.go";
        $env = getenv();
        $env['TASKENGINE_TOKEN'] = Harness::env('TASKENGINE_TEST_WORKER_TOKEN');
        $this->process = proc_open([PHP_BINARY, __DIR__ . '/scenario_worker.php', $mode, $this->events, $this->go],
            [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => STDERR], $this->pipes, null, $env);
        $this->pid = proc_get_status($this->process)['pid'];
    }

    public function running(): bool
    {
        return $this->pipes !== [] && proc_get_status($this->process)['running'];
    }

    /** @return list<string> */
    public function lines(): array
    {
        if (!is_file($this->events)) {
            return [];
        }
        return array_values(array_filter(array_map('trim', file($this->events))));
    }

    public function waitForEvent(string $prefix, float $timeout = 20.0): string
    {
        $found = null;
        Harness::waitUntil(function () use ($prefix, &$found): bool {
            foreach ($this->lines() as $line) {
                if (str_starts_with($line, $prefix)) {
                    $found = $line;
                    return true;
                }
            }
            if (!$this->running()) {
                throw new \RuntimeException("the child worker exited before {$prefix}; events: "
                    . implode(' | ', $this->lines()));
            }
            return false;
        }, "child event {$prefix}", $timeout);
        return $found;
    }

    public function signal(int $signal): void
    {
        if ($this->running()) {
            posix_kill($this->pid, $signal);
        }
    }

    /** SIGTERM, then the stats it prints at exit. */
    public function finish(): array
    {
        $this->signal(SIGTERM);
        $out = stream_get_contents($this->pipes[1]);
        $code = $this->close();
        if ($code !== 0) {
            throw new \RuntimeException("the child worker exited {$code}: {$out}");
        }
        $lines = array_values(array_filter(explode("\n", trim($out))));
        return json_decode(end($lines), true, 512, JSON_THROW_ON_ERROR);
    }

    public function kill(): void
    {
        if ($this->running()) {
            posix_kill($this->pid, SIGCONT);
            posix_kill($this->pid, SIGKILL);
        }
        $this->close();
    }

    /** Reaps the process; its exit code (-1 when already reaped). */
    private function close(): int
    {
        if ($this->pipes === []) {
            return -1;
        }
        fclose($this->pipes[1]);
        $this->pipes = [];
        return proc_close($this->process);
    }
}
