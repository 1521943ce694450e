<?php
declare(strict_types=1);

namespace Taskengine\Exception;

/** 401: no token, an unknown or a revoked one. */
class Unauthenticated extends ApiException
{
}
