"""taskengine.Worker: runs registered handlers for leased executions.

    worker = Worker(queues=["mail"])

    @worker.job("send-welcome")
    def send_welcome(ctx, payload):
        msg_id = ctx.effect("send-sms", lambda key: sms.send(payload["to"], dedup=key))
        return {"message": msg_id}

    worker.run()   # until SIGTERM/SIGINT or stop()

What run does, as the C++ SDK's Worker (clients/cpp/README.md):
- leases with a long poll for as many executions as it has free handler
  threads (never more than `concurrency`), with confirm_start: it confirms the
  start of each lease in one batch heartbeat and runs only those the server
  confirmed, so leases it never received cost no attempt (L4);
- heartbeats every held lease in one batch every min(lease)/3 from a thread
  of its own, which learns cancel requests and lost claims;
- reports each outcome: complete with the handler's result, fail with a class,
  or release; a finish is retried while the server is away (finish_retry_for)
  and dropped when the claim turns out stale;
- rides out a server that is down (backoff with jitter); a refused token
  (401/403 on lease) ends run by raising that error;
- stop() (SIGTERM/SIGINT when run in the main thread): no more leasing, the
  open long poll is aborted, leases not yet started are released, running
  handlers finish and are reported, then run returns.

A job this worker has no handler for fails retryable, naming the job.
"""

from __future__ import annotations

import collections
import logging
import os
import random
import signal
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple

from . import __version__
from .client import Client, Lease
from .context import (Canceled, EffectAmbiguous, JobContext, LeaseLost, PermanentError,
                      RetryableError)
from .errors import ApiError, TaskengineError, TransportError
from .transport import Abort

Handler = Callable[[JobContext, Dict[str, Any]], Any]

log = logging.getLogger("taskengine.worker")


@dataclass
class Outcome:
    kind: str  # "complete" | "fail" | "release"
    result: Any = None
    failure_class: str = "retryable"
    error: str = ""
    retry_after_ms: int = 0


@dataclass
class WorkerStats:
    leased: int = 0
    completed: int = 0
    failed: int = 0
    released: int = 0
    lost: int = 0  # claims found stale or gone: nothing published
    reconnects: int = 0


def _default_worker_id() -> str:
    return f"{socket.gethostname() or 'worker'}:{os.getpid()}"


class Worker:
    """A remote worker. Thread-safe: stop() and stats may be used from any thread.

    client: default Client() (TASKENGINE_SERVER, TASKENGINE_TOKEN).
    queues: in priority order. Default ["default"].
    concurrency: handler threads, the most leases held at once. Default 4.
    poll_wait: the lease long poll, seconds (at most 30). Default 30.
    max_jobs: run returns after this many leases (0 = never). Default 0.
    idle_heartbeat: seconds between registration heartbeats without leases. Default 10.
    finish_retry_for: seconds a finish is retried while the server is away. Default 300.
    """

    def __init__(self, client: Optional[Client] = None, *, queues: Sequence[str] = ("default",),
                 concurrency: int = 4, worker_id: Optional[str] = None, name: str = "",
                 poll_wait: float = 30.0, max_jobs: int = 0, idle_heartbeat: float = 10.0,
                 reconnect_min: float = 0.1, reconnect_max: float = 5.0,
                 finish_retry_for: float = 300.0):
        self.client = client or Client()
        self.queues = list(queues) or ["default"]
        self.concurrency = max(1, min(int(concurrency), 100))
        self.worker_id = worker_id or _default_worker_id()
        self.name = name
        self.poll_wait = max(0.0, min(float(poll_wait), 30.0))
        self.max_jobs = max_jobs
        self.idle_heartbeat = idle_heartbeat
        self.reconnect_min = max(reconnect_min, 0.01)
        self.reconnect_max = max(reconnect_max, self.reconnect_min)
        self.finish_retry_for = finish_retry_for
        self._handlers: Dict[str, Handler] = {}
        self._stopping = threading.Event()
        self._abort: Optional[Abort] = None  # ends the open long poll
        self._cv = threading.Condition()
        # Protected by _cv:
        self._queue: Deque[JobContext] = collections.deque()  # leased, not started
        self._held: Dict[Tuple[str, int], JobContext] = {}  # leased, not yet reported
        self._leasing_done = False
        self._heartbeat_done = False
        self._new_lease = False
        self._stats = WorkerStats()

    # ---- registration

    def job(self, name: str) -> Callable[[Handler], Handler]:
        """Decorator: registers `fn(ctx, payload)` as the handler of job `name`."""
        def register(fn: Handler) -> Handler:
            self.register(name, fn)
            return fn
        return register

    def register(self, name: str, fn: Handler) -> None:
        if name in self._handlers:
            raise ValueError(f"job {name!r} already has a handler")
        self._handlers[name] = fn

    @property
    def stats(self) -> WorkerStats:
        with self._cv:
            return WorkerStats(**vars(self._stats))

    # ---- running

    def stop(self) -> None:
        """Graceful stop (see the module comment). Idempotent; safe in a signal handler."""
        self._stopping.set()
        abort = self._abort
        if abort is not None:
            abort.abort()
        threading.Thread(target=self._notify_all, daemon=True).start()

    def _notify_all(self) -> None:
        with self._cv:
            self._cv.notify_all()

    def run(self, install_signal_handlers: bool = True) -> WorkerStats:
        """Leases and runs until stop() or max_jobs; returns the stats.

        Raises the ApiError that made it give up (401/403 on lease). With
        install_signal_handlers (and in the main thread) SIGTERM and SIGINT
        call stop().
        """
        if not self._handlers:
            raise ValueError("no handlers registered (use @worker.job(name))")
        previous = {}
        if install_signal_handlers and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda *_: self.stop())
        threads = [threading.Thread(target=self._handler_loop, name=f"taskengine-handler-{i}",
                                    daemon=True) for i in range(self.concurrency)]
        heartbeats = threading.Thread(target=self._heartbeat_loop, name="taskengine-heartbeat",
                                      daemon=True)
        for t in threads + [heartbeats]:
            t.start()
        fatal: Optional[BaseException] = None
        try:
            self._lease_loop()
        except ApiError as e:
            fatal = e
        finally:
            with self._cv:
                self._leasing_done = True
                self._cv.notify_all()
            for t in threads:
                t.join()
            with self._cv:
                self._heartbeat_done = True
                self._cv.notify_all()
            heartbeats.join()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if fatal is not None:
            raise fatal
        return self.stats

    def _lease_loop(self) -> None:
        backoff = self.reconnect_min
        last_error = ""
        while not self._stopping.is_set():
            with self._cv:
                self._cv.wait_for(lambda: self._stopping.is_set()
                                  or len(self._held) < self.concurrency)
                if self._stopping.is_set():
                    return
                if self.max_jobs and self._stats.leased >= self.max_jobs:
                    return
                free = self.concurrency - len(self._held)
                if self.max_jobs:
                    free = min(free, self.max_jobs - self._stats.leased)
            self._abort = Abort()
            if self._stopping.is_set():
                return
            try:
                leases = self.client.lease(
                    self.worker_id, self.queues, max=min(free, 100),
                    wait_ms=int(self.poll_wait * 1000), abort=self._abort, name=self.name,
                    host=socket.gethostname(), pid=os.getpid(),
                    version=f"taskengine-python/{__version__}", concurrency=self.concurrency,
                    confirm_start=True)
            except TaskengineError as e:
                if self._stopping.is_set():
                    return
                if getattr(e, "http_status", 0) in (401, 403):
                    log.error("lease refused: %s", e)
                    raise
                with self._cv:
                    self._stats.reconnects += 1
                if str(e) != last_error:
                    log.warning("cannot lease (%s); retrying with backoff", e)
                last_error = str(e)
                self._stopping.wait(backoff + random.uniform(0, backoff / 2))
                backoff = min(backoff * 2, self.reconnect_max)
                continue
            finally:
                self._abort = None
            if last_error:
                log.info("server reachable again")
            last_error = ""
            backoff = self.reconnect_min
            if not leases:
                continue
            confirmed = self._confirm_starts(leases)
            with self._cv:
                for lease in confirmed:
                    ctx = JobContext(self.client, lease)
                    self._held[(lease.id, lease.claim_version)] = ctx
                    self._queue.append(ctx)
                    self._stats.leased += 1
                self._new_lease = True
                self._cv.notify_all()

    def _confirm_starts(self, leases: List[Lease]) -> List[Lease]:
        items = [{"id": lease.id, "claim_version": lease.claim_version, "started": True}
                 for lease in leases]
        with self._cv:
            processed, failed = self._stats.completed + self._stats.failed, self._stats.failed
        confirmed: List[Lease] = []
        try:
            answers = self.client.heartbeats(self.worker_id, items, processed, failed)
            if len(answers) == len(leases):
                confirmed = [lease for lease, a in zip(leases, answers) if a.get("ok")]
            else:
                log.warning("could not confirm the start of %d lease(s): unexpected answer",
                            len(leases))
        except TaskengineError as e:
            # Unconfirmed leases lapse and, never started, are requeued at no attempt's cost.
            log.warning("could not confirm the start of %d lease(s): %s", len(leases), e)
        with self._cv:
            dropped = len(leases) - len(confirmed)
            self._stats.leased += dropped
            self._stats.lost += dropped
        return confirmed

    def _handler_loop(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._queue or self._leasing_done)
                if not self._queue:
                    return
                ctx = self._queue.popleft()
            if self._stopping.is_set():
                self._report(ctx, Outcome("release"))  # not started: another worker runs it now
            else:
                self._report(ctx, self._run_one(ctx))

    def _run_one(self, ctx: JobContext) -> Outcome:
        handler = self._handlers.get(ctx.job)
        if handler is None:
            return Outcome("fail", error=f"no handler for job {ctx.job!r} on worker "
                           f"{self.worker_id} (it runs: {', '.join(sorted(self._handlers))})")
        try:
            return Outcome("complete", result=handler(ctx, ctx.payload))
        except Canceled:
            return Outcome("release")  # released while cancel is requested: ends canceled
        except LeaseLost:
            ctx.mark_lost()
            return Outcome("release")
        except EffectAmbiguous as e:
            return Outcome("fail", failure_class="ambiguous", error=str(e))
        except PermanentError as e:
            return Outcome("fail", failure_class="permanent", error=str(e) or "permanent error")
        except RetryableError as e:
            after = int((e.retry_after or 0) * 1000)
            return Outcome("fail", error=str(e), retry_after_ms=after)
        except Exception as e:  # a handler's bug or its sink's failure: retried with backoff
            log.exception("handler of job %s raised", ctx.job)
            return Outcome("fail", error=f"{type(e).__name__}: {e}")

    def _report(self, ctx: JobContext, outcome: Outcome) -> None:
        lost = ctx.lost
        if not lost:
            body: Dict[str, Any] = {"claim_version": ctx.claim_version}
            if outcome.kind == "complete":
                if outcome.result is not None:
                    body["result"] = outcome.result
            elif outcome.kind == "fail":
                body.update({"class": outcome.failure_class, "error": outcome.error,
                             "retry_after_ms": outcome.retry_after_ms})
            if outcome.kind != "complete":
                progress = ctx.take_progress()
                if progress is not None:
                    try:
                        self.client.worker_call(ctx.id, "heartbeat",
                                                {"claim_version": ctx.claim_version,
                                                 "progress": progress})
                    except TaskengineError:
                        pass
            deadline = time.monotonic() + self.finish_retry_for
            backoff = self.reconnect_min
            while True:
                try:
                    self.client.worker_call(ctx.id, outcome.kind, body)
                    break
                except ApiError as e:
                    if e.code in ("stale", "not_found"):
                        lost = True
                        break
                    if not e.retryable or time.monotonic() >= deadline:
                        log.error("could not report execution %s: %s", ctx.id, e)
                        lost = True
                        break
                except TransportError as e:
                    if time.monotonic() >= deadline:
                        log.error("could not report execution %s: %s", ctx.id, e)
                        lost = True
                        break
                time.sleep(backoff)
                backoff = min(backoff * 2, self.reconnect_max)
        with self._cv:
            self._held.pop((ctx.id, ctx.claim_version), None)
            if lost:
                self._stats.lost += 1
            elif outcome.kind == "complete":
                self._stats.completed += 1
            elif outcome.kind == "fail":
                self._stats.failed += 1
            else:
                self._stats.released += 1
            self._cv.notify_all()

    def _heartbeat_loop(self) -> None:
        last = time.monotonic()
        reported_down = False
        while True:
            with self._cv:
                while True:
                    if self._heartbeat_done:
                        return
                    interval = self.idle_heartbeat
                    for ctx in self._held.values():
                        if ctx.lease.lease_ms > 0:
                            interval = min(interval, ctx.lease.lease_ms / 3000.0)
                    interval = max(interval, 0.02)
                    self._new_lease = False
                    due = last + interval
                    now = time.monotonic()
                    if now >= due:
                        break
                    self._cv.wait_for(lambda: self._heartbeat_done or self._new_lease, due - now)
                held = list(self._held.values())
                processed, failed = self._stats.completed + self._stats.failed, self._stats.failed
            last = time.monotonic()
            items = []
            for ctx in held:
                item: Dict[str, Any] = {"id": ctx.id, "claim_version": ctx.claim_version}
                progress = ctx.take_progress()
                if progress is not None:
                    item["progress"] = progress
                items.append(item)
            try:
                answers = self.client.heartbeats(self.worker_id, items, processed, failed)
            except TaskengineError as e:
                if not reported_down:
                    log.warning("heartbeat failed: %s", e)
                reported_down = True
                continue
            reported_down = False
            # Answers come in request order: each applies to its own lease.
            if len(answers) == len(held):
                for ctx, answer in zip(held, answers):
                    ctx.apply(answer)
