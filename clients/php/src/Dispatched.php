<?php
declare(strict_types=1);

namespace Taskengine;

/** The answer to a dispatch: $created is false for a repeat of an earlier key (HTTP 200). Immutable. */
final class Dispatched
{
    public function __construct(
        public readonly string $id,
        public readonly string $status,
        public readonly bool $created,
        public readonly string $statusUrl,
    ) {
    }

    /** @param array<string, mixed> $doc */
    public static function fromAnswer(array $doc): self
    {
        return new self((string) ($doc['id'] ?? ''), (string) ($doc['status'] ?? ''),
            (bool) ($doc['created'] ?? false), (string) ($doc['status_url'] ?? ''));
    }
}
