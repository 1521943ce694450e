<?php
declare(strict_types=1);

require __DIR__ . '/../autoload.php';
require __DIR__ . '/Harness.php';
require __DIR__ . '/ChildWorker.php';
