<?php
declare(strict_types=1);

namespace Taskengine\Exception;

/**
 * The server answered with an error document: the API's stable code
 * (apiCode: "not_found", "conflict", "stale", ...), the HTTP status and details.
 */
class ApiException extends TaskengineException
{
    /** @param array<string, mixed> $details */
    public function __construct(
        public readonly int $httpStatus,
        public readonly string $apiCode,
        public readonly string $apiMessage,
        public readonly array $details = [],
    ) {
        parent::__construct("{$apiCode} (HTTP {$httpStatus}): {$apiMessage}", $httpStatus);
    }

    public function isRetryable(): bool
    {
        return in_array($this->httpStatus, [429, 502, 503, 504], true);
    }

    /** The subclass for an answer's status and code. */
    public static function fromAnswer(int $httpStatus, string $code, string $message, array $details): self
    {
        $class = match (true) {
            $httpStatus === 429 => TooManyRequests::class,
            $code === 'conflict' && array_key_exists('existing_execution_id', $details) => IdempotencyConflict::class,
            $code === 'invalid_argument', $code === 'bad_request' => BadRequest::class,
            $code === 'unauthenticated' => Unauthenticated::class,
            $code === 'forbidden' => Forbidden::class,
            $code === 'not_found' => NotFound::class,
            $code === 'conflict' => Conflict::class,
            $code === 'stale' => Stale::class,
            $code === 'unavailable' => Unavailable::class,
            default => self::class,
        };
        return new $class($httpStatus, $code, $message, $details);
    }
}
