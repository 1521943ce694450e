"""JobContext: a handler's window on its leased execution, and the exceptions
that end a handler run with a given outcome.

A handler returns its result (any JSON value) or raises:
  RetryableError / any other exception  -> fail, class retryable (retried with backoff)
  PermanentError                        -> fail, class permanent (quarantined)
  EffectAmbiguous                       -> fail, class ambiguous (quarantined)
  Canceled                              -> released while cancel is requested: ends canceled
  LeaseLost                             -> nothing is published (another claim owns it)
"""

from __future__ import annotations

import json
import threading
from typing import Any, Callable, Dict, Optional

from .errors import ApiError, NotFound, Stale
from .client import Client, Lease


class HandlerStop(Exception):
    """Base of the exceptions that stop a handler on the SDK's behalf."""


class Canceled(HandlerStop):
    """Cancellation was requested: the handler stops; the execution ends canceled."""


class LeaseLost(HandlerStop):
    """This claim is no longer current (stale): nothing the handler does is published."""


class EffectAmbiguous(HandlerStop):
    """An earlier claim reserved the effect and never confirmed it; its outcome is unknown."""

    def __init__(self, key: str):
        super().__init__(f"effect {key} was reserved by an earlier attempt that never "
                         "confirmed it; its outcome is unknown")
        self.key = key


class RetryableError(Exception):
    """Fail this attempt; the server retries after its backoff (or retry_after seconds)."""

    def __init__(self, message: str, retry_after: Optional[float] = None):
        super().__init__(message)
        self.retry_after = retry_after


class PermanentError(Exception):
    """Fail for good: retrying cannot help (the execution is quarantined)."""


class NotPerformed(Exception):
    """Raised by an effect function: the effect certainly did not happen.

    The reservation is given back, so a retry proceeds instead of meeting
    ambiguous. Any other exception leaves the effect's outcome unknown.
    """


def _lost(error: ApiError) -> bool:
    return isinstance(error, (Stale, NotFound))


class JobContext:
    """One leased execution, valid while its handler runs. Thread-safe."""

    def __init__(self, client: Client, lease: Lease):
        self._client = client
        self.lease = lease
        self._lock = threading.Lock()
        self._progress: Optional[int] = None
        self._sent_progress: Optional[int] = None
        self._cancel_requested = False
        self._lost = False

    id = property(lambda self: self.lease.id)
    claim_version = property(lambda self: self.lease.claim_version)
    job = property(lambda self: self.lease.job)
    tenant = property(lambda self: self.lease.tenant)
    attempt = property(lambda self: self.lease.attempt)
    payload = property(lambda self: self.lease.payload)

    @property
    def cancel_requested(self) -> bool:
        return self._cancel_requested

    @property
    def lost(self) -> bool:
        return self._lost

    def effect_key(self, name: str) -> str:
        """The effect's key, "<execution id>:<name>": stable across retries and replays."""
        return self.lease.effect_key_prefix + name

    def progress(self, percent: int) -> None:
        """Records progress (clamped to 0..100); sent with the next heartbeat."""
        with self._lock:
            self._progress = max(0, min(100, int(percent)))

    def log(self, message: str, level: str = "info") -> None:
        """Appends a log line (debug, info, warn, error) to the execution.

        Raises LeaseLost when the claim is no longer current.
        """
        self._call("log", {"level": level, "message": message})

    def heartbeat(self) -> None:
        """Extends the lease now (the worker also does on its own) and checks for a stop."""
        body: Dict[str, Any] = {}
        progress = self.take_progress()
        if progress is not None:
            body["progress"] = progress
        doc = self._call("heartbeat", body)
        self.apply({"ok": True, "cancel_requested": bool(doc and doc.get("cancel_requested"))})
        self.checkpoint()

    def checkpoint(self) -> None:
        """A cheap cancellation point (no network): raises Canceled or LeaseLost
        when the last heartbeat learned the handler must stop."""
        if self._lost:
            raise LeaseLost(f"execution {self.id}: claim {self.claim_version} is no longer current")
        if self._cancel_requested:
            raise Canceled(f"execution {self.id}: cancellation was requested")

    def effect(self, name: str, perform: Callable[[str], Any], *, idempotent: bool = False) -> str:
        """Performs `perform(effect_key)` at most once per effect key and returns its detail.

        The ledger answers:
          proceed       perform runs; what it returns (str, or JSON of another
                        value) is committed as the detail and returned
          already_done  perform does not run; the recorded detail is returned
          ambiguous     an earlier claim reserved it and never confirmed: with
                        idempotent=True (the sink deduplicates by the key)
                        perform runs again with the same key; otherwise
                        EffectAmbiguous is raised (the execution is quarantined)
          canceled      Canceled is raised: start no new effect
          stale         LeaseLost is raised
        perform raising NotPerformed gives the reservation back (a retry
        proceeds); any other exception leaves the outcome unknown.
        """
        answer = self._call(f"effects/{name}/reserve", {})
        kind = answer.get("answer")
        key = answer.get("key") or self.effect_key(name)
        if kind == "already_done":
            return answer.get("detail") or ""
        if kind == "canceled":
            self._cancel_requested = True
            raise Canceled(f"execution {self.id}: cancellation was requested before effect {key}")
        if kind == "ambiguous" and not idempotent:
            raise EffectAmbiguous(key)
        if kind not in ("proceed", "ambiguous"):
            raise RetryableError(f"effect {key}: unexpected answer {kind!r}")
        try:
            detail = perform(key)
        except NotPerformed:
            if kind == "proceed":
                self._call(f"effects/{name}/release", {})
            raise
        if detail is None:
            detail = ""
        elif not isinstance(detail, str):
            detail = json.dumps(detail, separators=(",", ":"))
        self._call(f"effects/{name}/commit", {"detail": detail})
        return detail

    # ---- used by Worker

    def apply(self, answer: Dict[str, Any]) -> None:
        """Applies a heartbeat answer for this lease."""
        if not answer.get("ok", False):
            code = (answer.get("error") or {}).get("code")
            if code in ("stale", "not_found"):
                self._lost = True
            return
        if answer.get("cancel_requested"):
            self._cancel_requested = True

    def take_progress(self) -> Optional[int]:
        """The progress to send, if it changed since the last call."""
        with self._lock:
            if self._progress is None or self._progress == self._sent_progress:
                return None
            self._sent_progress = self._progress
            return self._progress

    def mark_lost(self) -> None:
        self._lost = True

    def _call(self, action: str, body: Dict[str, Any]) -> Any:
        if self._lost:
            raise LeaseLost(f"execution {self.id}: claim {self.claim_version} is no longer current")
        try:
            return self._client.worker_call(self.id, action,
                                            {"claim_version": self.claim_version, **body})
        except ApiError as e:
            if _lost(e):
                self._lost = True
                raise LeaseLost(f"execution {self.id}: {e}") from e
            raise
