<?php
declare(strict_types=1);

namespace Taskengine;

/** One page of executions, newest first; $nextCursor is null at the end. Immutable. */
final class Page
{
    /** @param list<array<string, mixed>> $items */
    public function __construct(
        public readonly array $items,
        public readonly ?string $nextCursor,
        public readonly ?int $total = null,
    ) {
    }
}
