<?php
declare(strict_types=1);

namespace Taskengine\Exception;

/** This claim is no longer current (stale): nothing the handler does is published. */
class LeaseLost extends HandlerStop
{
}
