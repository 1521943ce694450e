<?php
declare(strict_types=1);

namespace Taskengine\Exception;

/** Cancellation was requested: the handler stops; the execution ends canceled. */
class Canceled extends HandlerStop
{
}
