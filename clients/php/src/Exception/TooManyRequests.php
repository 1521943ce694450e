<?php
declare(strict_types=1);

namespace Taskengine\Exception;

/** 429: over a rate limit. */
class TooManyRequests extends ApiException
{
    /** The server's hint, in seconds. */
    public function retryAfter(): float
    {
        return is_numeric($this->details['retry_after'] ?? null) ? (float) $this->details['retry_after'] : 1.0;
    }
}
