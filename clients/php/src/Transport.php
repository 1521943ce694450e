<?php
declare(strict_types=1);

namespace Taskengine;

use Taskengine\Exception\ApiException;
use Taskengine\Exception\TaskengineException;
use Taskengine\Exception\TransportException;

/**
 * HTTP/1.1 over the curl extension, with keep-alive. call() sends one request
 * and returns the decoded JSON answer (null for an empty body) or throws a
 * TaskengineException. A call marked idempotent is retried with backoff after
 * a transport error or a 429/502/503/504 answer. A call given $abort (a
 * callable) checks it every 100 ms and ends early with a TransportException
 * "aborted" when it returns true (a long poll at shutdown).
 *
 * Not thread-safe (PHP has no threads): one per process.
 */
final class Transport
{
    private string $base;
    private ?\CurlHandle $handle = null;

    public function __construct(
        string $baseUrl,
        public string $token = '',
        public float $timeout = 30.0,
        public int $retries = 2,
        public float $backoff = 0.1,
        private string $userAgent = '',
    ) {
        $this->base = rtrim($baseUrl, '/');
        if (!preg_match('#^https?://[^/]+#', $this->base)) {
            throw new \InvalidArgumentException("server must be http(s)://host[:port], got {$baseUrl}");
        }
    }

    public function close(): void
    {
        $this->handle = null;
    }

    /**
     * @param array<string, string> $headers
     * @param null|callable(): bool $abort
     */
    public function call(string $method, string $path, mixed $body = null, array $headers = [],
                         ?float $timeout = null, bool $idempotent = false, ?callable $abort = null): mixed
    {
        $attempts = 1 + ($idempotent ? $this->retries : 0);
        $delay = $this->backoff;
        for ($attempt = 1; ; $attempt++) {
            try {
                return $this->once($method, $path, $body, $headers, $timeout ?? $this->timeout, $abort);
            } catch (TaskengineException $e) {
                if ($attempt >= $attempts || !$e->isRetryable() || ($abort !== null && $abort())) {
                    throw $e;
                }
                $wait = $delay;
                if ($e instanceof Exception\TooManyRequests) {
                    $wait = max($wait, min($e->retryAfter(), 5.0));
                }
                usleep((int) ($wait * 1e6));
                $delay *= 2;
            }
        }
    }

    private function once(string $method, string $path, mixed $body, array $headers, float $timeout,
                          ?callable $abort): mixed
    {
        $lines = ['Accept: application/json', 'Expect:'];
        if ($body !== null) {
            $lines[] = 'Content-Type: application/json';
        }
        if ($this->token !== '') {
            $lines[] = 'Authorization: Bearer ' . $this->token;
        }
        foreach ($headers as $name => $value) {
            $lines[] = "{$name}: {$value}";
        }
        // A long poll gets a handle of its own so that aborting it spares the kept-alive one.
        $handle = $abort === null ? ($this->handle ??= curl_init()) : curl_init();
        $location = '';
        $retryAfter = '';
        curl_reset($handle);
        curl_setopt_array($handle, [
            CURLOPT_URL => $this->base . $path,
            CURLOPT_CUSTOMREQUEST => $method,
            CURLOPT_HTTPHEADER => $lines,
            CURLOPT_RETURNTRANSFER => true,
            CURLOPT_TIMEOUT_MS => (int) ($timeout * 1000),
            CURLOPT_CONNECTTIMEOUT_MS => (int) (min($timeout, 10.0) * 1000),
            CURLOPT_USERAGENT => $this->userAgent,
            CURLOPT_HEADERFUNCTION => static function ($h, string $line) use (&$location, &$retryAfter): int {
                if (stripos($line, 'location:') === 0) {
                    $location = trim(substr($line, 9));
                } elseif (stripos($line, 'retry-after:') === 0) {
                    $retryAfter = trim(substr($line, 12));
                }
                return strlen($line);
            },
        ]);
        if ($body !== null) {
            curl_setopt($handle, CURLOPT_POSTFIELDS, json_encode($body, JSON_UNESCAPED_SLASHES | JSON_THROW_ON_ERROR));
        }
        $raw = $abort === null ? curl_exec($handle) : $this->abortable($handle, $abort);
        if ($raw === false) {
            $error = curl_error($handle) ?: 'aborted';
            if ($abort === null) {
                $this->handle = null;  // a failed connection may be half-closed: do not reuse it
            }
            throw new TransportException("{$method} {$path}: {$error}");
        }
        $status = (int) curl_getinfo($handle, CURLINFO_RESPONSE_CODE);
        return $this->decode($status, (string) $raw, $location, $retryAfter);
    }

    /** curl_exec that gives up when $abort() says so. Returns the body or false. */
    private function abortable(\CurlHandle $handle, callable $abort): string|false
    {
        $multi = curl_multi_init();
        curl_multi_add_handle($multi, $handle);
        try {
            do {
                $code = curl_multi_exec($multi, $active);
                if ($active && $code === CURLM_OK) {
                    if ($abort()) {
                        return false;
                    }
                    curl_multi_select($multi, 0.1);
                }
            } while ($active && $code === CURLM_OK);
            $info = curl_multi_info_read($multi);
            if ($info === false || $info['result'] !== CURLE_OK) {
                return false;
            }
            return (string) curl_multi_getcontent($handle);
        } finally {
            curl_multi_remove_handle($multi, $handle);
            curl_multi_close($multi);
        }
    }

    private function decode(int $status, string $raw, string $location, string $retryAfter): mixed
    {
        $doc = null;
        if ($raw !== '') {
            try {
                $doc = json_decode($raw, true, 512, JSON_THROW_ON_ERROR | JSON_BIGINT_AS_STRING);
            } catch (\JsonException) {
                throw ApiException::fromAnswer($status, $status === 503 ? 'unavailable' : 'internal',
                    substr($raw, 0, 200), []);
            }
        }
        if ($status >= 200 && $status < 300) {
            if (is_array($doc) && !isset($doc['status_url']) && $location !== '') {
                $doc['status_url'] = $location;
            }
            return $doc;
        }
        $error = is_array($doc) && is_array($doc['error'] ?? null) ? $doc['error'] : [];
        $details = is_array($error['details'] ?? null) ? $error['details'] : [];
        if ($retryAfter !== '' && !isset($details['retry_after'])) {
            $details['retry_after'] = $retryAfter;
        }
        $code = (string) ($error['code'] ?? ($status === 503 ? 'unavailable' : 'internal'));
        throw ApiException::fromAnswer($status, $code, (string) ($error['message'] ?? "HTTP {$status}"), $details);
    }
}
