"""A worker process for the scenarios that kill or stop one.

    child_worker.py crash|stall|graceful EVENTS GO

crash: runs sdk-crash; its effect's sink records "sink <key>" in EVENTS and
       then hangs, so the test can kill the process between effect and commit.
stall: runs sdk-stall; records "started <id>", waits for the file GO, then
       logs a line; a lost claim records "stale" and stops the handler, else
       it returns {"by": "first"}.
graceful: runs sdk-graceful; records "started <id>", blocks for a second and
       returns {"finished": true}.
At SIGTERM it stops and prints its stats as JSON.
"""

import dataclasses
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import taskengine  # noqa: E402


def record(path, line):
    with open(path, "a") as f:
        f.write(line + "\n")


def main():
    mode, events, go = sys.argv[1:4]
    worker = taskengine.Worker(queues=[f"sdk-{mode}"], concurrency=1, poll_wait=1.0)

    @worker.job("sdk-crash")
    def crash(ctx, payload):
        def sink(key):
            record(events, f"sink {key}")
            time.sleep(3600)
        ctx.effect("charge-card", sink)
        return {"charged": True}

    @worker.job("sdk-stall")
    def stall(ctx, payload):
        record(events, f"started {ctx.id}")
        while not os.path.exists(go):
            time.sleep(0.02)
        try:
            ctx.log("the first worker resumes")
        except taskengine.LeaseLost:
            record(events, "stale")
            raise
        return {"by": "first"}

    @worker.job("sdk-graceful")
    def graceful(ctx, payload):
        record(events, f"started {ctx.id}")
        time.sleep(1)
        return {"finished": True}

    stats = worker.run()
    print(json.dumps(dataclasses.asdict(stats)), flush=True)


if __name__ == "__main__":
    main()
