"""taskengine.Client: the public HTTP API (/api/v1) of a taskengine server.

    client = Client()  # TASKENGINE_SERVER and TASKENGINE_TOKEN from the environment
    d = client.dispatch("resize", {"image": 7}, tenant="acme", idempotency_key="resize-7")
    execution = client.wait(d.id, timeout=60)

Errors are raised as taskengine.errors classes. Ids are decimal strings (an
int is accepted wherever an id is passed). Reads, cancels and dispatches that
carry an idempotency key are retried after a transport error or a 429/5xx
answer; other writes are sent once. Thread-safe.
"""

from __future__ import annotations

import datetime as _dt
import os
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Union

from . import __version__
from .errors import WaitTimeout
from .transport import Abort, Transport

Id = Union[str, int]

TERMINAL_STATUSES = frozenset(
    {"succeeded", "failed", "quarantined", "canceled", "partially_canceled"})
"""Statuses an execution stays in until an operator acts (replay)."""

DEFAULT_SERVER = "http://127.0.0.1:8080"


@dataclass(frozen=True)
class Dispatched:
    """The answer to a dispatch: created is False for a repeat of an earlier key (200)."""

    id: str
    status: str
    created: bool
    status_url: str


@dataclass(frozen=True)
class BulkResult:
    """One item of a bulk dispatch, in request order.

    conflict: the key was used with a different payload; id names the existing
    execution and nothing was created for this item.
    """

    index: int
    id: str
    status: str
    created: bool
    conflict: bool
    status_url: str
    error: Optional[Dict[str, Any]] = None


@dataclass(frozen=True)
class Page:
    """One page of executions, newest first; next_cursor is None at the end."""

    items: List[Dict[str, Any]]
    next_cursor: Optional[str]
    total: Optional[int] = None


@dataclass
class Lease:
    """One leased execution as the worker protocol hands it out."""

    id: str
    claim_version: int
    job: str
    tenant: Optional[str]
    queue: str
    attempt: int
    payload: Dict[str, Any]
    lease_ms: int
    effect_key_prefix: str
    idempotency_key: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict)


def id_str(value: Any) -> str:
    """An API id (JSON number or string) as a decimal string."""
    if isinstance(value, bool) or value is None:
        return ""
    return str(value)


def _quote(value: Id) -> str:
    return urllib.parse.quote(str(value), safe="")


def _when(run_at: Union[str, _dt.datetime]) -> str:
    if isinstance(run_at, str):
        return run_at
    if run_at.tzinfo is None:
        raise ValueError("run_at must carry a time zone (datetime with tzinfo)")
    return run_at.isoformat()


def dispatch_body(payload: Optional[Mapping[str, Any]], tenant: Optional[str],
                  run_at: Union[str, _dt.datetime, None], delay: Optional[float],
                  lane: Optional[str], parent: Optional[Id]) -> Dict[str, Any]:
    """The JSON body of a dispatch (single or one bulk item)."""
    body: Dict[str, Any] = {"payload": dict(payload or {})}
    if tenant:
        body["tenant"] = tenant
    if run_at is not None and delay is not None:
        raise ValueError("give run_at or delay, not both")
    if run_at is not None:
        body["run_at"] = _when(run_at)
    if delay is not None:
        body["delay_ms"] = int(round(delay * 1000))
    if lane:
        body["lane"] = lane
    if parent is not None:
        body["parent"] = int(parent)
    return body


def _dispatched(doc: Mapping[str, Any]) -> Dispatched:
    return Dispatched(id=id_str(doc.get("id")), status=doc.get("status", ""),
                      created=bool(doc.get("created")), status_url=doc.get("status_url", ""))


class Client:
    """A taskengine server's REST API and worker protocol. Thread-safe.

    server: base URL; default TASKENGINE_SERVER, else http://127.0.0.1:8080.
    token: bearer token; default TASKENGINE_TOKEN (none when unset).
    timeout: seconds per call (long polls add their wait). Default 30.
    retries: extra tries of idempotent calls. Default 2.
    """

    def __init__(self, server: Optional[str] = None, token: Optional[str] = None, *,
                 timeout: float = 30.0, retries: int = 2):
        self.server = server or os.environ.get("TASKENGINE_SERVER") or DEFAULT_SERVER
        if token is None:
            token = os.environ.get("TASKENGINE_TOKEN", "")
        self._http = Transport(self.server, token, timeout=timeout, retries=retries,
                               user_agent=f"taskengine-python/{__version__}")

    @property
    def timeout(self) -> float:
        return self._http.timeout

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- dispatch

    def dispatch(self, job: str, payload: Optional[Mapping[str, Any]] = None, *,
                 tenant: Optional[str] = None, idempotency_key: Optional[str] = None,
                 run_at: Union[str, _dt.datetime, None] = None, delay: Optional[float] = None,
                 lane: Optional[str] = None, parent: Optional[Id] = None) -> Dispatched:
        """Admits one execution of `job` (202 created, 200 a repeat of the key).

        delay: seconds from now; run_at: an aware datetime or RFC 3339 string.
        Raises IdempotencyConflict (naming existing_execution_id) when the key
        was used with a different payload; nothing is created then.
        """
        headers = [("Idempotency-Key", idempotency_key)] if idempotency_key else []
        doc = self._http.call("POST", f"/api/v1/jobs/{_quote(job)}/dispatch",
                              dispatch_body(payload, tenant, run_at, delay, lane, parent),
                              headers=headers, idempotent=bool(idempotency_key))
        return _dispatched(doc)

    def dispatch_bulk(self, items: Sequence[Mapping[str, Any]]) -> List[BulkResult]:
        """Admits up to 1000 executions in one transaction.

        Each item: job, and optionally payload, tenant, idempotency_key, run_at,
        delay (seconds), lane, parent. An invalid item admits none (BadRequest
        with details["index"]); a key reused with another payload is a
        BulkResult with conflict=True.
        """
        body = []
        for item in items:
            entry = dispatch_body(item.get("payload"), item.get("tenant"), item.get("run_at"),
                                  item.get("delay"), item.get("lane"), item.get("parent"))
            entry["job"] = item["job"]
            if item.get("idempotency_key"):
                entry["idempotency_key"] = item["idempotency_key"]
            body.append(entry)
        keyed = all("idempotency_key" in entry for entry in body)
        doc = self._http.call("POST", "/api/v1/dispatch/bulk", {"items": body}, idempotent=keyed)
        return [BulkResult(index=int(r.get("index", i)), id=id_str(r.get("id")),
                           status=r.get("status", ""), created=bool(r.get("created")),
                           conflict=bool(r.get("conflict")), status_url=r.get("status_url", ""),
                           error=r.get("error"))
                for i, r in enumerate(doc.get("items", []))]

    # ---- executions

    def get(self, execution_id: Id) -> Dict[str, Any]:
        """Everything about one execution (payload, logs, effects, attempts, audit)."""
        return self._http.call("GET", f"/api/v1/executions/{_quote(execution_id)}",
                               idempotent=True)

    def status(self, execution_id: Id) -> str:
        """The execution's status ("queued", "running", "succeeded", ...)."""
        return self.get(execution_id)["status"]

    def wait(self, execution_id: Id, timeout: float = 60.0, poll: float = 0.2,
             statuses: Iterable[str] = TERMINAL_STATUSES) -> Dict[str, Any]:
        """Polls until the execution reaches one of `statuses` (default: ended).

        Returns the execution; raises WaitTimeout after `timeout` seconds.
        """
        wanted = frozenset(statuses)
        deadline = time.monotonic() + timeout
        while True:
            execution = self.get(execution_id)
            if execution.get("status") in wanted:
                return execution
            if time.monotonic() >= deadline:
                raise WaitTimeout(execution, timeout)
            time.sleep(min(poll, max(0.0, deadline - time.monotonic())))

    def result(self, execution_id: Id) -> Any:
        """The JSON result of a succeeded execution (Conflict before success)."""
        doc = self._http.call("GET", f"/api/v1/executions/{_quote(execution_id)}/result",
                              idempotent=True)
        return doc.get("result")

    def cancel(self, execution_id: Id, reason: str = "") -> Dict[str, Any]:
        """Cancels: at once when not running, else cancel_requested for its worker."""
        body = {"reason": reason} if reason else {}
        return self._http.call("POST", f"/api/v1/executions/{_quote(execution_id)}/cancel",
                               body, idempotent=True)

    def replay(self, execution_id: Id, reason: str, assume: Optional[str] = None
               ) -> Dict[str, Any]:
        """Queues a failed or quarantined execution again under its id.

        assume ("keep", "done", "not_done"): what to take of effects an earlier
        claim reserved and never confirmed. outcome is "replayed" or
        "pending_approval" (four-eyes).
        """
        body: Dict[str, Any] = {"reason": reason}
        if assume:
            body["assume"] = assume
        return self._http.call("POST", f"/api/v1/executions/{_quote(execution_id)}/replay",
                               body)

    def list(self, *, job: Optional[str] = None, tenant: Optional[str] = None,
             status: Union[str, Iterable[str], None] = None,
             trigger: Union[str, Iterable[str], None] = None, limit: Optional[int] = None,
             cursor: Optional[str] = None, **ranges: str) -> Page:
        """One page of executions, newest first.

        status/trigger: one value or several (any of them). ranges:
        queued_from, queued_to, ended_from, ended_to (RFC 3339).
        """
        query: Dict[str, str] = {}
        for name, value in (("job", job), ("tenant", tenant), ("status", status),
                            ("trigger", trigger)):
            if value:
                query[name] = value if isinstance(value, str) else ",".join(value)
        if limit:
            query["limit"] = str(limit)
        if cursor:
            query["cursor"] = cursor
        query.update({k: v for k, v in ranges.items() if v})
        path = "/api/v1/executions"
        if query:
            path += "?" + urllib.parse.urlencode(query)
        doc = self._http.call("GET", path, idempotent=True)
        return Page(items=list(doc.get("items", [])), next_cursor=doc.get("next_cursor") or None,
                    total=doc.get("total"))

    def iter_executions(self, **filters: Any) -> Iterator[Dict[str, Any]]:
        """Every execution matching `filters` (those of list), page after page."""
        cursor = None
        while True:
            page = self.list(cursor=cursor, **filters)
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    # ---- the worker protocol (used by Worker; documented in docs/openapi.json)

    def lease(self, worker_id: str, queues: Sequence[str], max: int = 1, wait_ms: int = 0,
              abort: Optional[Abort] = None, **registration: Any) -> List[Lease]:
        body: Dict[str, Any] = {"worker_id": worker_id, "queues": list(queues), "max": max,
                                "wait_ms": wait_ms}
        body.update({k: v for k, v in registration.items() if v})
        doc = self._http.call("POST", "/api/v1/worker/lease", body,
                              timeout=self._http.timeout + wait_ms / 1000.0, abort=abort)
        leases = []
        for item in doc.get("leases", []):
            leases.append(Lease(id=id_str(item.get("id")),
                                claim_version=int(item.get("claim_version", 0)),
                                job=item.get("job", ""), tenant=item.get("tenant"),
                                queue=item.get("queue", ""), attempt=int(item.get("attempt", 0)),
                                payload=item.get("payload") or {},
                                lease_ms=int(item.get("lease_ms") or 0),
                                effect_key_prefix=item.get("effect_key_prefix", ""),
                                idempotency_key=item.get("idempotency_key"), raw=item))
        return leases

    def heartbeats(self, worker_id: str, items: Sequence[Mapping[str, Any]],
                   processed: int = 0, failed: int = 0) -> List[Dict[str, Any]]:
        """One answer per item, in order: {"id", "ok", "cancel_requested", "error"}."""
        doc = self._http.call("POST", "/api/v1/worker/heartbeats",
                              {"worker_id": worker_id, "items": list(items),
                               "processed": processed, "failed": failed})
        return list(doc.get("items", []))

    def worker_call(self, execution_id: Id, action: str, body: Mapping[str, Any]) -> Any:
        """POST /api/v1/worker/executions/{id}/{action} (heartbeat, log, complete, ...)."""
        return self._http.call("POST", f"/api/v1/worker/executions/{_quote(execution_id)}/"
                               f"{action}", dict(body))
