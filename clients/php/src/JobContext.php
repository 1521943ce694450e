<?php
declare(strict_types=1);

namespace Taskengine;

use Taskengine\Exception\Canceled;
use Taskengine\Exception\EffectAmbiguous;
use Taskengine\Exception\LeaseLost;
use Taskengine\Exception\NotFound;
use Taskengine\Exception\NotPerformed;
use Taskengine\Exception\RetryableError;
use Taskengine\Exception\Stale;

/**
 * A handler's window on its leased execution, valid while handle() runs.
 * What the worker's heartbeats learn (a cancel request, a lost claim) reaches
 * it through $poll, which checkpoint() and effect() call first.
 */
final class JobContext
{
    public bool $cancelRequested = false;
    public bool $lost = false;
    private ?int $progress = null;
    private ?int $sentProgress = null;

    /** @param null|\Closure(JobContext): void $poll */
    public function __construct(
        private readonly Client $client,
        public readonly Lease $lease,
        private readonly ?\Closure $poll = null,
    ) {
    }

    public function id(): string { return $this->lease->id; }
    public function claimVersion(): int { return $this->lease->claimVersion; }
    public function job(): string { return $this->lease->job; }
    public function tenant(): ?string { return $this->lease->tenant; }
    public function attempt(): int { return $this->lease->attempt; }

    /** "<execution id>:<name>": stable across retries and replays. */
    public function effectKey(string $name): string
    {
        return $this->lease->effectKeyPrefix . $name;
    }

    /** Records progress (clamped to 0..100); sent with the next heartbeat. */
    public function progress(int $percent): void
    {
        $this->progress = max(0, min(100, $percent));
        if ($this->poll !== null) {
            ($this->poll)($this);
        }
    }

    /** Appends a log line (debug, info, warn, error). Throws LeaseLost when the claim is gone. */
    public function log(string $message, string $level = 'info'): void
    {
        $this->call('log', ['level' => $level, 'message' => $message]);
    }

    /** Extends the lease now (the worker also does on its own), then checkpoint(). */
    public function heartbeat(): void
    {
        $body = [];
        if (($progress = $this->takeProgress()) !== null) {
            $body['progress'] = $progress;
        }
        $doc = $this->call('heartbeat', $body);
        $this->apply(['ok' => true, 'cancel_requested' => (bool) ($doc['cancel_requested'] ?? false)]);
        $this->checkpoint();
    }

    /**
     * A cheap cancellation point: throws Canceled or LeaseLost when a heartbeat
     * learned that the handler must stop.
     */
    public function checkpoint(): void
    {
        if ($this->poll !== null) {
            ($this->poll)($this);
        }
        if ($this->lost) {
            throw new LeaseLost("execution {$this->id()}: claim {$this->claimVersion()} is no longer current");
        }
        if ($this->cancelRequested) {
            throw new Canceled("execution {$this->id()}: cancellation was requested");
        }
    }

    /**
     * Performs $perform($effectKey) at most once per effect key and returns its detail.
     *
     *   proceed       $perform runs; what it returns (a string, or JSON of another value)
     *                 is committed as the detail and returned
     *   already_done  $perform does not run; the recorded detail is returned
     *   ambiguous     an earlier claim reserved it and never confirmed: with
     *                 $idempotent (the sink deduplicates by the key) $perform runs
     *                 again with the same key; otherwise EffectAmbiguous is thrown
     *                 (the execution is quarantined)
     *   canceled      Canceled is thrown: start no new effect
     *   stale         LeaseLost is thrown
     * $perform throwing NotPerformed gives the reservation back (a retry proceeds);
     * any other exception leaves the outcome unknown.
     *
     * @param callable(string): mixed $perform
     */
    public function effect(string $name, callable $perform, bool $idempotent = false): string
    {
        $answer = $this->call('effects/' . rawurlencode($name) . '/reserve', []);
        $kind = $answer['answer'] ?? '';
        $key = $answer['key'] ?? $this->effectKey($name);
        switch ($kind) {
            case 'already_done':
                return (string) ($answer['detail'] ?? '');
            case 'canceled':
                $this->cancelRequested = true;
                throw new Canceled("execution {$this->id()}: cancellation was requested before effect {$key}");
            case 'ambiguous':
                if (!$idempotent) {
                    throw new EffectAmbiguous($key);
                }
                break;
            case 'proceed':
                break;
            default:
                throw new RetryableError("effect {$key}: unexpected answer {$kind}");
        }
        try {
            $detail = $perform($key);
        } catch (NotPerformed $e) {
            if ($kind === 'proceed') {
                $this->call('effects/' . rawurlencode($name) . '/release', []);
            }
            throw $e;
        }
        $detail = match (true) {
            $detail === null => '',
            is_string($detail) => $detail,
            default => json_encode($detail, JSON_UNESCAPED_SLASHES | JSON_THROW_ON_ERROR),
        };
        $this->call('effects/' . rawurlencode($name) . '/commit', ['detail' => $detail]);
        return $detail;
    }

    // ---- used by Worker

    /** Applies a heartbeat answer ({ok, cancel_requested, error}) for this lease. */
    public function apply(array $answer): void
    {
        if (!($answer['ok'] ?? false)) {
            if (in_array($answer['error']['code'] ?? '', ['stale', 'not_found'], true)) {
                $this->lost = true;
            }
            return;
        }
        if ($answer['cancel_requested'] ?? false) {
            $this->cancelRequested = true;
        }
    }

    /** The progress to send, if it changed since the last call. */
    public function takeProgress(): ?int
    {
        if ($this->progress === null || $this->progress === $this->sentProgress) {
            return null;
        }
        return $this->sentProgress = $this->progress;
    }

    private function call(string $action, array $body): mixed
    {
        if ($this->lost) {
            throw new LeaseLost("execution {$this->id()}: claim {$this->claimVersion()} is no longer current");
        }
        try {
            return $this->client->workerCall($this->id(), $action, ['claim_version' => $this->claimVersion()] + $body);
        } catch (Stale|NotFound $e) {
            $this->lost = true;
            throw new LeaseLost("execution {$this->id()}: {$e->getMessage()}", 0, $e);
        }
    }
}
