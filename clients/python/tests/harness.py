"""What the scenario tests share: the live server's address and tokens (set by
tests/clients/run.sh), workers run in a thread or in a child process, and
small waits that fail instead of hanging."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from typing import Callable, Dict, List, Optional

import taskengine

HERE = os.path.dirname(os.path.abspath(__file__))


def env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: run this test through tests/clients/run.sh python")
    return value


def scenarios() -> List[Dict]:
    with open(env("TASKENGINE_TEST_SCENARIOS")) as f:
        return json.load(f)["scenarios"]


_clients: Dict[str, taskengine.Client] = {}


def client(token_variable: str) -> taskengine.Client:
    """One client per token for the whole run (close_clients closes them)."""
    if token_variable not in _clients:
        _clients[token_variable] = taskengine.Client(env("TASKENGINE_SERVER"),
                                                     env(token_variable))
    return _clients[token_variable]


def admin() -> taskengine.Client:
    return client("TASKENGINE_TOKEN")


def worker_client() -> taskengine.Client:
    return client("TASKENGINE_TEST_WORKER_TOKEN")


def tenant_client() -> taskengine.Client:
    return client("TASKENGINE_TEST_TENANT_TOKEN")


def close_clients() -> None:
    for c in _clients.values():
        c.close()


def wait_until(done: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.02)


class ThreadWorker:
    """A Worker running in a thread of the test process."""

    def __init__(self, queue: str, handlers: Dict[str, Callable], **options):
        self.worker = taskengine.Worker(worker_client(), queues=[queue], concurrency=2,
                                        poll_wait=1.0, **options)
        for job, fn in handlers.items():
            self.worker.register(job, fn)
        self.error: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.worker.run(install_signal_handlers=False)
        except BaseException as e:  # reported by stop()
            self.error = e

    def __enter__(self) -> taskengine.Worker:
        self.thread.start()
        return self.worker

    def __exit__(self, *exc) -> None:
        self.worker.stop()
        self.thread.join(20)
        if self.thread.is_alive():
            raise AssertionError("the worker did not stop within 20 s")
        if self.error is not None and exc[0] is None:
            raise self.error


class ChildWorker:
    """tests/child_worker.py MODE in a child process; `events` is its event file."""

    def __init__(self, mode: str, name: str):
        work = env("TASKENGINE_TEST_WORK")
        self.events = os.path.join(work, f"py-{name}.events")
        self.go = os.path.join(work, f"py-{name}.go")
        child_env = dict(os.environ, TASKENGINE_TOKEN=env("TASKENGINE_TEST_WORKER_TOKEN"))
        self.process = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "child_worker.py"), mode, self.events, self.go],
            env=child_env, cwd=os.path.dirname(HERE), stdout=subprocess.PIPE, text=True)

    def lines(self) -> List[str]:
        try:
            with open(self.events) as f:
                return [line.strip() for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def wait_for_event(self, prefix: str, timeout: float = 20.0) -> str:
        found: List[str] = []

        def seen() -> bool:
            found[:] = [line for line in self.lines() if line.startswith(prefix)]
            if not found and self.process.poll() is not None:
                raise AssertionError(f"the child worker exited {self.process.returncode} "
                                     f"before {prefix!r}; events: {self.lines()}")
            return bool(found)

        wait_until(seen, f"child event {prefix!r}", timeout)
        return found[0]

    def finish(self) -> Dict:
        """SIGTERM, then the stats it prints at exit."""
        self.process.terminate()
        out, _ = self.process.communicate(timeout=20)
        if self.process.returncode != 0:
            raise AssertionError(f"the child worker exited {self.process.returncode}: {out}")
        return json.loads(out.strip().splitlines()[-1])

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.communicate(timeout=20)


def append_line(path: str, line: str) -> None:
    with open(path, "a") as f:
        f.write(line + "\n")
