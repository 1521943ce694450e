<?php
// Loads the Taskengine\ classes from src/ without Composer (Composer's
// autoloader does the same from composer.json).
declare(strict_types=1);

spl_autoload_register(static function (string $class): void {
    $prefix = 'Taskengine\\';
    if (!str_starts_with($class, $prefix)) {
        return;
    }
    $file = __DIR__ . '/src/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
    if (is_file($file)) {
        require $file;
    }
});
