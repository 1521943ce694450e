"""HTTP/1.1 with keep-alive over the standard library (http.client).

Transport.call sends one request and returns the decoded JSON answer (None
for an empty body) or raises a TaskengineError. Connections are pooled and
reused; one idle for longer than the server keeps it is dropped. A call marked
idempotent is retried, with backoff, after a transport error or a 429/502/503/
504 answer. An Abort passed to call ends a long poll from another thread.

Thread-safe.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.parse
from typing import Any, Mapping, Optional, Sequence, Tuple

from .errors import TaskengineError, TransportError, api_error

# The server closes a keep-alive connection idle for 10 s; reuse younger ones only.
_MAX_IDLE_SECONDS = 5.0


class Abort:
    """Ends the call it is passed to (from any thread). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._aborted = False
        self._sock: Optional[socket.socket] = None

    @property
    def aborted(self) -> bool:
        return self._aborted

    def abort(self) -> None:
        with self._lock:
            self._aborted = True
            sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _attach(self, sock: Optional[socket.socket]) -> bool:
        with self._lock:
            self._sock = sock
            return not self._aborted


class Transport:
    def __init__(self, base_url: str, token: str = "", timeout: float = 30.0,
                 retries: int = 2, backoff: float = 0.1, user_agent: str = ""):
        parsed = urllib.parse.urlsplit(base_url.rstrip("/"))
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"base_url must be http(s)://host[:port], got {base_url!r}")
        self._https = parsed.scheme == "https"
        self._host = parsed.hostname
        self._port = parsed.port or (443 if self._https else 80)
        self._prefix = parsed.path
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._user_agent = user_agent
        self._lock = threading.Lock()
        self._idle: list[Tuple[http.client.HTTPConnection, float]] = []

    def close(self) -> None:
        """Closes the idle connections."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()

    def call(self, method: str, path: str, body: Any = None, *,
             headers: Sequence[Tuple[str, str]] = (), timeout: Optional[float] = None,
             idempotent: bool = False, abort: Optional[Abort] = None) -> Any:
        """Sends `method path` with `body` as JSON (None: no body)."""
        attempts = 1 + (self.retries if idempotent else 0)
        delay = self.backoff
        for attempt in range(1, attempts + 1):
            try:
                return self._once(method, path, body, headers, timeout, abort)
            except TaskengineError as e:
                if attempt == attempts or not e.retryable or (abort and abort.aborted):
                    raise
                wait = delay
                if getattr(e, "http_status", 0) == 429:
                    wait = max(wait, min(float(getattr(e, "retry_after", 1.0)), 5.0))
                time.sleep(wait)
                delay *= 2
        raise AssertionError("unreachable")

    def _connection(self) -> Tuple[http.client.HTTPConnection, bool]:
        """A kept-alive connection (True) or a new one (False)."""
        now = time.monotonic()
        with self._lock:
            while self._idle:
                conn, since = self._idle.pop()
                if now - since < _MAX_IDLE_SECONDS:
                    return conn, True
                conn.close()
        return self._new_connection(), False

    def _new_connection(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        return cls(self._host, self._port, timeout=self.timeout)

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._idle.append((conn, time.monotonic()))

    def _once(self, method: str, path: str, body: Any,
              headers: Sequence[Tuple[str, str]], timeout: Optional[float],
              abort: Optional[Abort]) -> Any:
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        all_headers = {"Accept": "application/json"}
        if data is not None:
            all_headers["Content-Type"] = "application/json"
        if self.token:
            all_headers["Authorization"] = "Bearer " + self.token
        if self._user_agent:
            all_headers["User-Agent"] = self._user_agent
        all_headers.update(headers)
        conn, reused = self._connection()
        # A reused connection the server closed meanwhile fails before any
        # answer; the request is then sent again once on a new connection.
        for fresh_try in (False, True):
            try:
                conn.timeout = timeout or self.timeout
                if conn.sock is None:
                    conn.connect()
                conn.sock.settimeout(conn.timeout)
                if abort is not None and not abort._attach(conn.sock):
                    raise TransportError("aborted")
                conn.request(method, self._prefix + path, body=data, headers=all_headers)
                response = conn.getresponse()
                raw = response.read()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError,
                    ConnectionResetError) as e:
                conn.close()
                if reused and not fresh_try and not (abort and abort.aborted):
                    conn, reused = self._new_connection(), False
                    continue
                raise TransportError(f"{method} {path}: {e}") from None
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                if abort is not None and abort.aborted:
                    raise TransportError("aborted") from None
                raise TransportError(f"{method} {path}: {e or type(e).__name__}") from None
            finally:
                if abort is not None:
                    abort._attach(None)
        if response.will_close:
            conn.close()
        else:
            self._give_back(conn)
        return _decode(response, raw)


def _decode(response: http.client.HTTPResponse, raw: bytes) -> Any:
    status = response.status
    doc: Any = None
    if raw:
        try:
            doc = json.loads(raw)
        except ValueError:
            code = "unavailable" if status == 503 else "internal"
            raise api_error(status, code, raw[:200].decode("utf-8", "replace")) from None
    if 200 <= status < 300:
        if isinstance(doc, dict) and "status_url" not in doc and response.getheader("Location"):
            doc["status_url"] = response.getheader("Location")
        return doc
    error: Mapping[str, Any] = doc.get("error", {}) if isinstance(doc, dict) else {}
    details = dict(error.get("details") or {})
    retry_after = response.getheader("Retry-After")
    if retry_after and "retry_after" not in details:
        details["retry_after"] = retry_after
    code = error.get("code") or ("unavailable" if status == 503 else "internal")
    raise api_error(status, code, error.get("message") or f"HTTP {status}", details)
