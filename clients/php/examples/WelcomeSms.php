<?php
// The example's job: sends a user's welcome SMS exactly once. A new job is
// this: one class and one $worker->register() line.
declare(strict_types=1);

namespace Example;

use Taskengine\Job;
use Taskengine\JobContext;

final class WelcomeSms implements Job
{
    public function handle(JobContext $ctx, array $payload): mixed
    {
        $ctx->log("welcoming user {$payload['user']}");
        $messageId = $ctx->effect(
            'send-sms',
            fn (string $key) => self::sendSms($payload['phone'], 'Welcome aboard!', $key),
            idempotent: true,  // the gateway deduplicates by the effect key
        );
        $ctx->progress(100);
        return ['message_id' => $messageId];
    }

    /** A stand-in for an SMS gateway that deduplicates by a key: the message id. */
    private static function sendSms(string $phone, string $text, string $dedupKey): string
    {
        echo "SMS to {$phone}: {$text}\n";
        return 'sms-' . substr(hash('sha256', $dedupKey), 0, 12);
    }
}
