<?php
// The example worker: runs the job class WelcomeSms for executions of the
// queue "apps" (docs/clients.md shows the server's configuration).
//
//   TASKENGINE_SERVER=http://127.0.0.1:8080 TASKENGINE_TOKEN=<worker token> php examples/worker.php
//
// SIGTERM or Ctrl-C stops it gracefully. One execution at a time: run more
// processes for more at once.
declare(strict_types=1);

require __DIR__ . '/../autoload.php';
require __DIR__ . '/WelcomeSms.php';

$worker = new Taskengine\Worker(queues: ['apps']);
$worker->register('welcome-sms', Example\WelcomeSms::class);
echo json_encode($worker->run()), "\n";
