<?php
declare(strict_types=1);

namespace Taskengine\Exception;

/** Client::wait: the execution did not end in time; $execution is its last state. */
class WaitTimeout extends TaskengineException
{
    /** @param array<string, mixed> $execution */
    public function __construct(public readonly array $execution, float $timeout)
    {
        parent::__construct("execution {$execution['id']} is still {$execution['status']} after {$timeout} s");
    }
}
