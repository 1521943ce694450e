<?php
declare(strict_types=1);

namespace Taskengine\Exception;

/**
 * Thrown by an effect function: the effect certainly did not happen, so the
 * reservation is given back and a retry proceeds. Any other exception leaves
 * the effect's outcome unknown.
 */
class NotPerformed extends \RuntimeException
{
}
