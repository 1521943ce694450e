<?php
declare(strict_types=1);

namespace Taskengine\Exception;

/** 503: the server or its database cannot serve now. */
class Unavailable extends ApiException
{
}
