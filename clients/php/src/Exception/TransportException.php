<?php
declare(strict_types=1);

namespace Taskengine\Exception;

/** No HTTP answer came: the server is down, restarting or unreachable. */
class TransportException extends TaskengineException
{
    public int $httpStatus = 0;
    public string $apiCode = 'unavailable';

    public function isRetryable(): bool
    {
        return true;
    }
}
