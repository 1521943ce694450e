<?php
declare(strict_types=1);

namespace Taskengine\Exception;

/**
 * 409 on dispatch: the idempotency key was used with a different payload.
 * Nothing was created; existingExecutionId() names the key's execution.
 */
class IdempotencyConflict extends Conflict
{
    public function existingExecutionId(): string
    {
        return (string) ($this->details['existing_execution_id'] ?? '');
    }
}
