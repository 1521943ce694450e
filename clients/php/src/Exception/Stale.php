<?php
declare(strict_types=1);

namespace Taskengine\Exception;

/** 409 stale: the claim version is no longer current (the lease was lost). */
class Stale extends ApiException
{
}
