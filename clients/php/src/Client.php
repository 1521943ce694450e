<?php
declare(strict_types=1);

namespace Taskengine;

use Taskengine\Exception\WaitTimeout;

/**
 * The public HTTP API (/api/v1) of a taskengine server.
 *
 *     $client = new Client();  // TASKENGINE_SERVER and TASKENGINE_TOKEN
 *     $d = $client->dispatch('resize', ['image' => 7], tenant: 'acme', idempotencyKey: 'resize-7');
 *     $execution = $client->wait($d->id, timeout: 60);
 *
 * Failures throw Taskengine\Exception classes. Ids are decimal strings (an int
 * is accepted wherever an id is passed). Reads, cancels and dispatches that
 * carry an idempotency key are retried after a transport error or a 429/5xx
 * answer; other writes are sent once. One per process (PHP has no threads).
 */
final class Client
{
    public const VERSION = '0.1.0';
    public const DEFAULT_SERVER = 'http://127.0.0.1:8080';
    /** Statuses an execution stays in until an operator acts (replay). */
    public const TERMINAL_STATUSES = ['succeeded', 'failed', 'quarantined', 'canceled', 'partially_canceled'];

    public readonly string $server;
    private Transport $http;

    /**
     * @param ?string $server base URL; default TASKENGINE_SERVER, else http://127.0.0.1:8080
     * @param ?string $token bearer token; default TASKENGINE_TOKEN (none when unset)
     * @param float $timeout seconds per call (long polls add their wait); default 30
     * @param int $retries extra tries of idempotent calls; default 2
     */
    public function __construct(?string $server = null, ?string $token = null, float $timeout = 30.0,
                                int $retries = 2)
    {
        $this->server = $server ?: (getenv('TASKENGINE_SERVER') ?: self::DEFAULT_SERVER);
        $this->http = new Transport($this->server, $token ?? (getenv('TASKENGINE_TOKEN') ?: ''), $timeout,
            $retries, 0.1, 'taskengine-php/' . self::VERSION);
    }

    public function timeout(): float
    {
        return $this->http->timeout;
    }

    public function token(): string
    {
        return $this->http->token;
    }

    // ---- dispatch

    /**
     * Admits one execution of $job: created (HTTP 202) or a repeat of the key (200, created false).
     * Throws IdempotencyConflict (existingExecutionId()) when the key was used with a
     * different payload; nothing is created then.
     *
     * @param array<string, mixed> $payload
     */
    public function dispatch(string $job, array $payload = [], ?string $tenant = null,
                             ?string $idempotencyKey = null, \DateTimeInterface|string|null $runAt = null,
                             ?int $delayMs = null, ?string $lane = null, int|string|null $parent = null): Dispatched
    {
        $headers = $idempotencyKey !== null ? ['Idempotency-Key' => $idempotencyKey] : [];
        $doc = $this->http->call('POST', '/api/v1/jobs/' . rawurlencode($job) . '/dispatch',
            self::dispatchBody($payload, $tenant, $runAt, $delayMs, $lane, $parent), $headers,
            idempotent: $idempotencyKey !== null);
        return Dispatched::fromAnswer($doc);
    }

    /**
     * Admits up to 1000 executions in one transaction. Each item: job, and
     * optionally payload, tenant, idempotency_key, run_at, delay_ms, lane, parent.
     * An invalid item admits none (BadRequest, details index).
     *
     * @param list<array<string, mixed>> $items
     * @return list<BulkResult>
     */
    public function dispatchBulk(array $items): array
    {
        $body = [];
        foreach ($items as $item) {
            $entry = self::dispatchBody($item['payload'] ?? [], $item['tenant'] ?? null, $item['run_at'] ?? null,
                $item['delay_ms'] ?? null, $item['lane'] ?? null, $item['parent'] ?? null);
            $entry['job'] = $item['job'];
            if (isset($item['idempotency_key'])) {
                $entry['idempotency_key'] = $item['idempotency_key'];
            }
            $body[] = $entry;
        }
        $keyed = array_reduce($body, static fn (bool $all, array $e) => $all && isset($e['idempotency_key']), true);
        $doc = $this->http->call('POST', '/api/v1/dispatch/bulk', ['items' => $body], idempotent: $keyed);
        $results = [];
        foreach ($doc['items'] ?? [] as $i => $r) {
            $results[] = new BulkResult((int) ($r['index'] ?? $i), (string) ($r['id'] ?? ''), (string) ($r['status'] ?? ''),
                (bool) ($r['created'] ?? false), (bool) ($r['conflict'] ?? false), (string) ($r['status_url'] ?? ''),
                $r['error'] ?? null);
        }
        return $results;
    }

    // ---- executions

    /** Everything about one execution (payload, logs, effects, attempts, audit). */
    public function get(int|string $id): array
    {
        return $this->http->call('GET', '/api/v1/executions/' . rawurlencode((string) $id), idempotent: true);
    }

    public function status(int|string $id): string
    {
        return $this->get($id)['status'];
    }

    /**
     * Polls until the execution reaches one of $statuses (default: ended) and returns it.
     * Throws WaitTimeout after $timeout seconds.
     *
     * @param list<string> $statuses
     */
    public function wait(int|string $id, float $timeout = 60.0, float $poll = 0.2,
                         array $statuses = self::TERMINAL_STATUSES): array
    {
        $deadline = microtime(true) + $timeout;
        while (true) {
            $execution = $this->get($id);
            if (in_array($execution['status'], $statuses, true)) {
                return $execution;
            }
            if (microtime(true) >= $deadline) {
                throw new WaitTimeout($execution, $timeout);
            }
            usleep((int) (min($poll, max(0.0, $deadline - microtime(true))) * 1e6));
        }
    }

    /** The JSON result of a succeeded execution (Conflict before success). */
    public function result(int|string $id): mixed
    {
        $doc = $this->http->call('GET', '/api/v1/executions/' . rawurlencode((string) $id) . '/result',
            idempotent: true);
        return $doc['result'] ?? null;
    }

    /** Cancels: at once when not running, else cancel_requested for its worker. */
    public function cancel(int|string $id, string $reason = ''): array
    {
        return $this->http->call('POST', '/api/v1/executions/' . rawurlencode((string) $id) . '/cancel',
            $reason !== '' ? ['reason' => $reason] : new \stdClass(), idempotent: true);
    }

    /**
     * Queues a failed or quarantined execution again under its id. $assume
     * ('keep', 'done', 'not_done'): what to take of effects an earlier claim
     * reserved and never confirmed. outcome: 'replayed' or 'pending_approval'.
     */
    public function replay(int|string $id, string $reason, ?string $assume = null): array
    {
        $body = ['reason' => $reason];
        if ($assume !== null) {
            $body['assume'] = $assume;
        }
        return $this->http->call('POST', '/api/v1/executions/' . rawurlencode((string) $id) . '/replay', $body);
    }

    /**
     * One page of executions, newest first. $status and $trigger: one value or
     * a list (any of them). $ranges: queued_from, queued_to, ended_from, ended_to.
     *
     * @param string|list<string>|null $status
     * @param string|list<string>|null $trigger
     * @param array<string, string> $ranges
     */
    public function list(?string $job = null, ?string $tenant = null, string|array|null $status = null,
                         string|array|null $trigger = null, ?int $limit = null, ?string $cursor = null,
                         array $ranges = []): Page
    {
        $query = array_filter([
            'job' => $job, 'tenant' => $tenant,
            'status' => is_array($status) ? implode(',', $status) : $status,
            'trigger' => is_array($trigger) ? implode(',', $trigger) : $trigger,
            'limit' => $limit, 'cursor' => $cursor,
        ] + $ranges, static fn ($v) => $v !== null && $v !== '');
        $path = '/api/v1/executions' . ($query ? '?' . http_build_query($query) : '');
        $doc = $this->http->call('GET', $path, idempotent: true);
        return new Page($doc['items'] ?? [], ($doc['next_cursor'] ?? null) ?: null,
            isset($doc['total']) ? (int) $doc['total'] : null);
    }

    /**
     * Every execution matching the filters of list(), page after page.
     *
     * @return \Generator<int, array<string, mixed>>
     */
    public function executions(mixed ...$filters): \Generator
    {
        $cursor = null;
        do {
            $page = $this->list(...$filters, cursor: $cursor);
            yield from $page->items;
            $cursor = $page->nextCursor;
        } while ($cursor !== null);
    }

    // ---- the worker protocol (used by Worker; see docs/openapi.json)

    /**
     * @param list<string> $queues
     * @param array<string, mixed> $registration name, host, pid, version, concurrency, confirm_start
     * @param null|callable(): bool $abort
     * @return list<Lease>
     */
    public function lease(string $workerId, array $queues, int $max = 1, int $waitMs = 0, array $registration = [],
                          ?callable $abort = null): array
    {
        $body = ['worker_id' => $workerId, 'queues' => $queues, 'max' => $max, 'wait_ms' => $waitMs]
            + array_filter($registration, static fn ($v) => $v !== null && $v !== '');
        $doc = $this->http->call('POST', '/api/v1/worker/lease', $body,
            timeout: $this->http->timeout + $waitMs / 1000, abort: $abort);
        return array_map([Lease::class, 'fromAnswer'], $doc['leases'] ?? []);
    }

    /**
     * One answer per item, in order: {id, ok, cancel_requested, error}.
     *
     * @param list<array<string, mixed>> $items
     */
    public function heartbeats(string $workerId, array $items, int $processed = 0, int $failed = 0): array
    {
        $doc = $this->http->call('POST', '/api/v1/worker/heartbeats',
            ['worker_id' => $workerId, 'items' => $items, 'processed' => $processed, 'failed' => $failed]);
        return $doc['items'] ?? [];
    }

    /** POST /api/v1/worker/executions/{id}/{action} (heartbeat, log, complete, ...). */
    public function workerCall(string $id, string $action, array $body): mixed
    {
        return $this->http->call('POST', '/api/v1/worker/executions/' . rawurlencode($id) . '/' . $action, $body);
    }

    /** @return array<string, mixed> */
    private static function dispatchBody(array $payload, ?string $tenant, \DateTimeInterface|string|null $runAt,
                                         ?int $delayMs, ?string $lane, int|string|null $parent): array
    {
        if ($runAt !== null && $delayMs !== null) {
            throw new \InvalidArgumentException('give runAt or delayMs, not both');
        }
        $body = ['payload' => (object) $payload];
        if ($tenant !== null && $tenant !== '') {
            $body['tenant'] = $tenant;
        }
        if ($runAt !== null) {
            $body['run_at'] = $runAt instanceof \DateTimeInterface ? $runAt->format(\DateTimeInterface::RFC3339_EXTENDED) : $runAt;
        }
        if ($delayMs !== null) {
            $body['delay_ms'] = $delayMs;
        }
        if ($lane !== null && $lane !== '') {
            $body['lane'] = $lane;
        }
        if ($parent !== null) {
            $body['parent'] = (int) $parent;
        }
        return $body;
    }
}
