<?php
// The heartbeat process of a PHP Worker (src/HeartbeatSidecar.php); the
// Worker starts it with its own pid as the argument.
declare(strict_types=1);

// In this tree, or installed by Composer (vendor/taskengine/client/bin).
require is_file(__DIR__ . '/../../../autoload.php') ? __DIR__ . '/../../../autoload.php' : __DIR__ . '/../autoload.php';

(new Taskengine\HeartbeatSidecar((int) ($argv[1] ?? 0)))->run();
