<?php
declare(strict_types=1);

namespace Taskengine\Exception;

/** Base of every exception this package throws. */
class TaskengineException extends \RuntimeException
{
    /** Worth trying again later (no answer, 429, 502-504). */
    public function isRetryable(): bool
    {
        return false;
    }
}
