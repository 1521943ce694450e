<?php
declare(strict_types=1);

namespace Taskengine;

/**
 * A job's handler: one class per job, registered with Worker::register().
 *
 * handle() returns the result (any JSON value, null for none) or throws:
 *   RetryableError / any other exception -> fail, class retryable (retried with backoff)
 *   PermanentError                       -> fail, class permanent (quarantined)
 *   EffectAmbiguous                      -> fail, class ambiguous (quarantined)
 *   Canceled                             -> released while cancel is requested: ends canceled
 *   LeaseLost                            -> nothing is published (another claim owns it)
 */
interface Job
{
    /** @param array<string, mixed> $payload */
    public function handle(JobContext $ctx, array $payload): mixed;
}
