<?php
declare(strict_types=1);

namespace Taskengine\Exception;

/** 404: missing, or another tenant's (the API does not tell them apart). */
class NotFound extends ApiException
{
}
