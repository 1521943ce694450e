<?php
declare(strict_types=1);

namespace Taskengine;

/**
 * One item of a bulk dispatch, in request order. $conflict: the key was used
 * with a different payload; $id names the existing execution and nothing was
 * created for this item. Immutable.
 */
final class BulkResult
{
    /** @param null|array{code: string, message: string} $error */
    public function __construct(
        public readonly int $index,
        public readonly string $id,
        public readonly string $status,
        public readonly bool $created,
        public readonly bool $conflict,
        public readonly string $statusUrl,
        public readonly ?array $error = null,
    ) {
    }
}
