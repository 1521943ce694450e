<?php
declare(strict_types=1);

namespace Taskengine;

use Taskengine\Exception\TaskengineException;

/**
 * The heartbeats of a PHP Worker, from a process of their own
 * (bin/heartbeat-sidecar.php): PHP has no threads, and a handler that blocks
 * (sleep, a slow sink) must not let its lease lapse.
 *
 * It reads JSON lines on stdin from its worker:
 *   {"op": "config", "server", "token", "worker_id", "idle_ms"}   first, once
 *   {"op": "hold", "id", "claim_version", "lease_ms"}              a lease now running
 *   {"op": "progress", "id", "claim_version", "progress"}
 *   {"op": "drop", "id", "claim_version", "processed", "failed"}   reported
 * and heartbeats every held lease in one batch every min(lease)/3 (without
 * leases every idle_ms, which keeps the worker registered). It writes one JSON
 * line per news: {"id", "claim_version", "cancel_requested": true} or
 * {"id", "claim_version", "lost": true}. EOF on stdin (its worker exited or
 * died) ends it. While its worker is stopped (SIGSTOP, state T) it sends no
 * heartbeat: the lease of a stopped worker must lapse as it would with threads.
 */
final class HeartbeatSidecar
{
    private ?Client $client = null;
    private string $workerId = '';
    private int $idleMs = 10000;
    /** @var array<string, array{id: string, claim_version: int, lease_ms: int, progress: ?int, told: array<string, bool>}> */
    private array $held = [];
    private int $processed = 0;
    private int $failed = 0;

    public function __construct(private readonly int $workerPid)
    {
    }

    public function run(): void
    {
        // Ctrl-C reaches the whole process group: the worker stops gracefully and
        // needs heartbeats until it is done; it ends this process by closing stdin.
        if (function_exists('pcntl_signal')) {
            pcntl_signal(SIGINT, SIG_IGN);
        }
        $stdin = STDIN;
        stream_set_blocking($stdin, false);
        $buffer = '';
        $last = microtime(true);
        while (true) {
            $interval = $this->intervalMs() / 1000;
            $wait = max(0.0, $last + $interval - microtime(true));
            $read = [$stdin];
            $none = null;
            $ready = @stream_select($read, $none, $none, (int) $wait, (int) (fmod($wait, 1.0) * 1e6));
            if ($ready > 0) {
                $chunk = fread($stdin, 65536);
                if ($chunk === '' || $chunk === false) {
                    if (feof($stdin)) {
                        return;
                    }
                } else {
                    $buffer .= $chunk;
                    while (($newline = strpos($buffer, "\n")) !== false) {
                        $this->handle(json_decode(substr($buffer, 0, $newline), true) ?? []);
                        $buffer = substr($buffer, $newline + 1);
                    }
                }
            }
            if ($this->client !== null && microtime(true) >= $last + $this->intervalMs() / 1000) {
                $last = microtime(true);
                if (!$this->workerStopped()) {
                    $this->beat();
                }
            }
        }
    }

    private function intervalMs(): int
    {
        $interval = $this->idleMs;
        foreach ($this->held as $lease) {
            if ($lease['lease_ms'] > 0) {
                $interval = min($interval, intdiv($lease['lease_ms'], 3));
            }
        }
        return max($interval, 20);
    }

    private function handle(array $message): void
    {
        $key = ($message['id'] ?? '') . '/' . ($message['claim_version'] ?? '');
        switch ($message['op'] ?? '') {
            case 'config':
                $this->client = new Client($message['server'], $message['token']);
                $this->workerId = $message['worker_id'];
                $this->idleMs = (int) ($message['idle_ms'] ?? 10000);
                break;
            case 'hold':
                $this->held[$key] = ['id' => (string) $message['id'], 'claim_version' => (int) $message['claim_version'],
                    'lease_ms' => (int) ($message['lease_ms'] ?? 0), 'progress' => null, 'told' => []];
                break;
            case 'progress':
                if (isset($this->held[$key])) {
                    $this->held[$key]['progress'] = (int) $message['progress'];
                }
                break;
            case 'drop':
                unset($this->held[$key]);
                $this->processed = (int) ($message['processed'] ?? $this->processed);
                $this->failed = (int) ($message['failed'] ?? $this->failed);
                break;
        }
    }

    private function beat(): void
    {
        $keys = array_keys($this->held);
        $items = [];
        foreach ($keys as $key) {
            $lease = $this->held[$key];
            $item = ['id' => $lease['id'], 'claim_version' => $lease['claim_version']];
            if ($lease['progress'] !== null) {
                $item['progress'] = $lease['progress'];
                $this->held[$key]['progress'] = null;
            }
            $items[] = $item;
        }
        try {
            $answers = $this->client->heartbeats($this->workerId, $items, $this->processed, $this->failed);
        } catch (TaskengineException $e) {
            fwrite(STDERR, "taskengine worker {$this->workerId}: heartbeat failed: {$e->getMessage()}\n");
            return;
        }
        if (count($answers) !== count($keys)) {
            return;
        }
        foreach ($keys as $i => $key) {
            $answer = $answers[$i];
            $news = null;
            if (!($answer['ok'] ?? false) && in_array($answer['error']['code'] ?? '', ['stale', 'not_found'], true)) {
                $news = 'lost';
            } elseif ($answer['cancel_requested'] ?? false) {
                $news = 'cancel_requested';
            }
            if ($news !== null && !isset($this->held[$key]['told'][$news])) {
                $this->held[$key]['told'][$news] = true;
                // A worker that exited meanwhile reads nothing: EOF on stdin ends this process next.
                @fwrite(STDOUT, json_encode(['id' => $this->held[$key]['id'],
                    'claim_version' => $this->held[$key]['claim_version'], $news => true]) . "\n");
            }
        }
    }

    /** The worker process is stopped or traced (Linux /proc); elsewhere: never. */
    private function workerStopped(): bool
    {
        $stat = @file_get_contents("/proc/{$this->workerPid}/stat");
        if ($stat === false) {
            return false;
        }
        $state = substr($stat, strrpos($stat, ')') + 2, 1);
        return $state === 'T' || $state === 't';
    }
}
