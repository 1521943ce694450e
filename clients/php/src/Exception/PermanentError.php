<?php
declare(strict_types=1);

namespace Taskengine\Exception;

/** Fail for good: retrying cannot help (the execution is quarantined). */
class PermanentError extends \RuntimeException
{
}
