<?php
declare(strict_types=1);

namespace Taskengine\Exception;

/** Base of the exceptions that stop a handler on the SDK's behalf. */
class HandlerStop extends TaskengineException
{
}
