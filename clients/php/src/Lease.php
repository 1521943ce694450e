<?php
declare(strict_types=1);

namespace Taskengine;

/** One leased execution as the worker protocol hands it out. Immutable. */
final class Lease
{
    /**
     * @param array<string, mixed> $payload
     * @param array<string, mixed> $raw the whole lease object
     */
    public function __construct(
        public readonly string $id,
        public readonly int $claimVersion,
        public readonly string $job,
        public readonly ?string $tenant,
        public readonly string $queue,
        public readonly int $attempt,
        public readonly array $payload,
        public readonly int $leaseMs,
        public readonly string $effectKeyPrefix,
        public readonly array $raw = [],
    ) {
    }

    /** @param array<string, mixed> $l */
    public static function fromAnswer(array $l): self
    {
        return new self((string) ($l['id'] ?? ''), (int) ($l['claim_version'] ?? 0), (string) ($l['job'] ?? ''),
            isset($l['tenant']) ? (string) $l['tenant'] : null, (string) ($l['queue'] ?? ''),
            (int) ($l['attempt'] ?? 0), is_array($l['payload'] ?? null) ? $l['payload'] : [],
            (int) ($l['lease_ms'] ?? 0), (string) ($l['effect_key_prefix'] ?? ''), $l);
    }
}
