<?php
declare(strict_types=1);

namespace Taskengine\Exception;

/** 409 conflict: the request does not fit the current state. */
class Conflict extends ApiException
{
}
