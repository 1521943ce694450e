<?php
declare(strict_types=1);

namespace Taskengine\Exception;

/** 400: malformed, or refused by validation. */
class BadRequest extends ApiException
{
}
