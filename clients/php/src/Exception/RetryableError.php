<?php
declare(strict_types=1);

namespace Taskengine\Exception;

/** Fail this attempt; the server retries after its backoff (or $retryAfterMs). */
class RetryableError extends \RuntimeException
{
    public function __construct(string $message, public readonly int $retryAfterMs = 0)
    {
        parent::__construct($message);
    }
}
