<?php
// The example dispatcher: asks for user 42's welcome SMS and waits for it.
//
//   TASKENGINE_SERVER=http://127.0.0.1:8080 TASKENGINE_TOKEN=<dispatch token> php examples/dispatcher.php
//
// Running it twice sends one SMS: the idempotency key makes the second
// dispatch answer the first execution.
declare(strict_types=1);

require __DIR__ . '/../autoload.php';

use Taskengine\Client;
use Taskengine\Exception\IdempotencyConflict;

$client = new Client();
try {
    $d = $client->dispatch('welcome-sms', ['user' => 42, 'phone' => '+15550100'], idempotencyKey: 'welcome-42');
} catch (IdempotencyConflict $e) {
    fwrite(STDERR, "welcome-42 was dispatched with another payload: execution {$e->existingExecutionId()}\n");
    exit(1);
}
echo "execution {$d->id} " . ($d->created ? 'created' : 'already dispatched') . "\n";
$execution = $client->wait($d->id, timeout: 60);
echo "execution {$d->id} {$execution['status']}\n";
if ($execution['status'] === 'succeeded') {
    echo json_encode($client->result($d->id)), "\n";
}
