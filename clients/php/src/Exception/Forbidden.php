<?php
declare(strict_types=1);

namespace Taskengine\Exception;

/** 403: the token lacks the scope or the tenant. */
class Forbidden extends ApiException
{
}
