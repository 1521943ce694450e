"""The client conformance scenarios (clients/scenarios.json) against a live
server: one test per scenario id; an id without an implementation here fails.

Run through tests/clients/run.sh python (ctest clients_python_test)."""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import sys
import threading
import time
import unittest
import uuid

import taskengine
from tests import harness


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def dispatch_idempotency(t: unittest.TestCase, s: dict) -> None:
    client = harness.admin()
    key = unique("py-key")
    first = client.dispatch(s["job"], {"n": 1}, idempotency_key=key)
    t.assertTrue(first.created)
    t.assertEqual(first.status, "queued")
    t.assertEqual(first.status_url, f"/api/v1/executions/{first.id}")
    again = client.dispatch(s["job"], {"n": 1}, idempotency_key=key)
    t.assertEqual((again.id, again.created), (first.id, False))
    with t.assertRaises(taskengine.IdempotencyConflict) as caught:
        client.dispatch(s["job"], {"n": 2}, idempotency_key=key)
    t.assertEqual(caught.exception.http_status, 409)
    t.assertEqual(caught.exception.existing_execution_id, first.id)

    key2 = unique("py-key")
    bulk = client.dispatch_bulk([
        {"job": s["job"], "payload": {"n": 1}, "idempotency_key": key},
        {"job": s["job"], "payload": {"n": 2}, "idempotency_key": key},
        {"job": s["job"], "payload": {"n": 3}, "idempotency_key": key2, "delay": 60,
         "lane": "py-lane"},
    ])
    t.assertEqual([(r.id, r.created, r.conflict) for r in bulk[:2]],
                  [(first.id, False, False), (first.id, False, True)])
    t.assertTrue(bulk[2].created)
    t.assertNotEqual(bulk[2].id, first.id)
    t.assertEqual(client.get(bulk[2].id)["lane_key"], "py-lane")

    run_at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    later = client.dispatch(s["job"], {"n": 4}, run_at=run_at)
    execution = client.get(later.id)
    t.assertEqual(execution["status"], "queued")
    t.assertTrue(execution["run_at"].startswith(run_at.strftime("%Y-%m-%dT%H:%M")),
                 execution["run_at"])


def list_pagination(t: unittest.TestCase, s: dict) -> None:
    client = harness.admin()
    ids = [client.dispatch(s["job"], {"i": i}).id for i in range(s["count"])]
    seen, cursor, pages = [], None, 0
    while True:
        page = client.list(job=s["job"], status=["queued"], limit=s["page_size"], cursor=cursor)
        t.assertLessEqual(len(page.items), s["page_size"])
        seen += [str(item["id"]) for item in page.items]
        pages += 1
        if not page.next_cursor:
            break
        cursor = page.next_cursor
    t.assertEqual(seen, sorted(ids, key=int, reverse=True))
    t.assertGreaterEqual(pages, s["count"] // s["page_size"])
    t.assertEqual([str(e["id"]) for e in client.iter_executions(job=s["job"], limit=2)], seen)


def effect_completes(t: unittest.TestCase, s: dict) -> None:
    client = harness.admin()
    sunk = []

    def handler(ctx, payload):
        detail = ctx.effect(s["effect"], lambda key: sunk.append(key) or f"sms-{len(sunk)}")
        ctx.log("sms sent")
        ctx.progress(100)
        return {"sms": detail}

    d = client.dispatch(s["job"], {"to": "+15550100"})
    with harness.ThreadWorker(s["queue"], {s["job"]: handler}):
        execution = client.wait(d.id, timeout=20)
    t.assertEqual(execution["status"], "succeeded", execution)
    t.assertEqual(client.result(d.id), {"sms": "sms-1"})
    key = f"{d.id}:{s['effect']}"
    t.assertEqual(sunk, [key])
    effects = [(e["name"], e["key"], e["state"], e["detail"]) for e in execution["effects"]]
    t.assertEqual(effects, [(s["effect"], key, "committed", "sms-1")])
    t.assertIn("sms sent", [line["message"] for line in execution["logs"]])


def crash_between_effect_and_commit(t: unittest.TestCase, s: dict) -> None:
    client = harness.admin()
    d = client.dispatch(s["job"], {"amount": 42})
    child = harness.ChildWorker("crash", unique("crash"))
    try:
        child.wait_for_event("sink ")
    finally:
        child.kill()
    sunk_again = []

    def handler(ctx, payload):
        detail = ctx.effect(s["effect"], lambda key: sunk_again.append(key) or "charge-2")
        return {"charged": detail}

    with harness.ThreadWorker(s["queue"], {s["job"]: handler}):
        execution = client.wait(d.id, timeout=30)
        t.assertEqual(execution["status"], "quarantined", execution)
        t.assertEqual(execution["failure_class"], "ambiguous")
        t.assertEqual(sunk_again, [])
        t.assertEqual(child.lines(), [f"sink {d.id}:{s['effect']}"])
        t.assertEqual([(e["name"], e["state"]) for e in execution["effects"]],
                      [(s["effect"], "reserved")])

        replay = client.replay(d.id, "the card gateway shows the charge", assume="done")
        t.assertEqual(replay["outcome"], "replayed")
        execution = client.wait(d.id, timeout=20)
    t.assertEqual(execution["status"], "succeeded", execution)
    t.assertEqual(sunk_again, [])
    t.assertEqual(len(child.lines()), 1)


def stopped_worker_is_stale(t: unittest.TestCase, s: dict) -> None:
    client = harness.admin()
    d = client.dispatch(s["job"], {})
    child = harness.ChildWorker("stall", unique("stall"))
    try:
        t.assertEqual(child.wait_for_event("started "), f"started {d.id}")
        os.kill(child.process.pid, signal.SIGSTOP)
        with harness.ThreadWorker(s["queue"], {s["job"]: lambda ctx, p: {"by": "second"}}):
            execution = client.wait(d.id, timeout=30)
        t.assertEqual(execution["status"], "succeeded", execution)
        os.kill(child.process.pid, signal.SIGCONT)
        open(child.go, "w").close()
        child.wait_for_event("stale")
        stats = child.finish()
    finally:
        if child.process.poll() is None:
            os.kill(child.process.pid, signal.SIGCONT)
        child.kill()
    t.assertEqual((stats["lost"], stats["completed"]), (1, 0), stats)
    t.assertEqual(client.result(d.id), {"by": "second"})
    t.assertEqual(client.status(d.id), "succeeded")


def long_handler_keeps_lease(t: unittest.TestCase, s: dict) -> None:
    client = harness.admin()

    def handler(ctx, payload):
        ctx.progress(50)
        time.sleep(s["block_ms"] / 1000)
        return {"slept_ms": s["block_ms"]}

    d = client.dispatch(s["job"], {})
    with harness.ThreadWorker(s["queue"], {s["job"]: handler}):
        execution = client.wait(d.id, timeout=20)
    t.assertEqual((execution["status"], execution["attempt"]), ("succeeded", 1), execution)
    t.assertEqual(execution["consecutive_lease_expiries"], 0)
    t.assertEqual(client.result(d.id), {"slept_ms": s["block_ms"]})


def sigterm_finishes_running_handler(t: unittest.TestCase, s: dict) -> None:
    client = harness.admin()
    d = client.dispatch(s["job"], {})
    child = harness.ChildWorker("graceful", unique("graceful"))
    try:
        t.assertEqual(child.wait_for_event("started "), f"started {d.id}")
        stats = child.finish()
    finally:
        child.kill()
    t.assertEqual((stats["completed"], stats["leased"]), (1, 1), stats)
    execution = client.get(d.id)
    t.assertEqual((execution["status"], execution["attempt"]), ("succeeded", 1), execution)
    t.assertEqual(client.result(d.id), {"finished": True})


def cancel_seen_by_handler(t: unittest.TestCase, s: dict) -> None:
    client = harness.admin()
    started, seen = threading.Event(), threading.Event()

    def handler(ctx, payload):
        started.set()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                ctx.checkpoint()
            except taskengine.Canceled:
                seen.set()
                raise
            time.sleep(0.02)
        return {"cancel": "never seen"}

    d = client.dispatch(s["job"], {})
    with harness.ThreadWorker(s["queue"], {s["job"]: handler}):
        t.assertTrue(started.wait(20), "the handler did not start")
        answer = client.cancel(d.id, reason="the customer withdrew")
        t.assertTrue(answer["cancel_requested"], answer)
        execution = client.wait(d.id, timeout=20)
    t.assertTrue(seen.is_set())
    t.assertEqual(execution["status"], "canceled", execution)


def bad_token_401(t: unittest.TestCase, s: dict) -> None:
    bad = taskengine.Client(harness.env("TASKENGINE_SERVER"), "te_not_a_token")
    t.addCleanup(bad.close)
    for call in (lambda: bad.get("1"), lambda: bad.dispatch("sdk-echo", {})):
        with t.assertRaises(taskengine.Unauthenticated) as caught:
            call()
        t.assertEqual(caught.exception.http_status, 401)
    worker = taskengine.Worker(bad, queues=["sdk-idle"], poll_wait=0.5)
    worker.register("sdk-echo", lambda ctx, payload: None)
    with t.assertRaises(taskengine.Unauthenticated):
        worker.run(install_signal_handlers=False)


def other_tenant_404(t: unittest.TestCase, s: dict) -> None:
    theirs = harness.admin().dispatch(s["job"], {"store": 2}, tenant="b")
    mine = harness.tenant_client()
    for execution_id in (theirs.id, "987654321"):
        for call in (mine.get, mine.cancel, mine.result):
            with t.assertRaises(taskengine.NotFound) as caught:
                call(execution_id)
            t.assertEqual(caught.exception.http_status, 404)
    own = mine.dispatch(s["job"], {"store": 1}, tenant="a")
    t.assertEqual(mine.get(own.id)["tenant"], "a")


def examples_run(t: unittest.TestCase, s: dict) -> None:
    examples = os.path.join(os.path.dirname(harness.HERE), "examples")
    worker_env = dict(os.environ, TASKENGINE_TOKEN=harness.env("TASKENGINE_TEST_WORKER_TOKEN"))
    worker = subprocess.Popen([sys.executable, os.path.join(examples, "worker.py")],
                              env=worker_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    try:
        outputs = []
        for _ in range(2):
            run = subprocess.run([sys.executable, os.path.join(examples, "dispatcher.py")],
                                 capture_output=True, text=True, timeout=90)
            t.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            outputs.append(run.stdout)
    finally:
        worker.terminate()
        worker_out, _ = worker.communicate(timeout=20)
    t.assertIn("created", outputs[0])
    t.assertIn("already dispatched", outputs[1])
    for out in outputs:
        t.assertIn("succeeded", out)
        t.assertIn("message_id", out)
    t.assertEqual(worker.returncode, 0, worker_out)
    t.assertEqual(worker_out.count("SMS to +15550100"), 1, worker_out)


IMPLEMENTED = {f.__name__: f for f in (
    dispatch_idempotency, list_pagination, effect_completes, crash_between_effect_and_commit,
    stopped_worker_is_stale, long_handler_keeps_lease, sigterm_finishes_running_handler,
    cancel_seen_by_handler, bad_token_401, other_tenant_404,
    examples_run)}


class Scenarios(unittest.TestCase):
    """Filled from clients/scenarios.json below."""

    @classmethod
    def tearDownClass(cls) -> None:
        harness.close_clients()


def _make(scenario: dict):
    def test(self: unittest.TestCase) -> None:
        run = IMPLEMENTED.get(scenario["id"])
        if run is None:
            self.fail(f"scenario {scenario['id']!r} ({scenario['title']}) is not implemented "
                      "by the Python client's tests")
        run(self, scenario)
    test.__doc__ = scenario["title"]
    return test


for _scenario in harness.scenarios():
    setattr(Scenarios, f"test_{_scenario['id']}", _make(_scenario))


if __name__ == "__main__":
    unittest.main()
