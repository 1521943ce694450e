"""Throughput of one Python worker process on no-op jobs over HTTP.

    python3 bench/noop_worker.py JOBS CONCURRENCY

Dispatches JOBS executions of sdk-noop (queue sdk-bench) in bulk with
TASKENGINE_TOKEN, then runs one Worker (TASKENGINE_WORKER_TOKEN) until it has
finished them and prints jobs/s. tests/clients/throughput.sh runs it.
"""

import logging
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import taskengine  # noqa: E402


def main() -> None:
    jobs, concurrency = int(sys.argv[1]), int(sys.argv[2])
    with taskengine.Client() as admin:
        for start in range(0, jobs, 1000):
            admin.dispatch_bulk([{"job": "sdk-noop"}] * min(1000, jobs - start))
    client = taskengine.Client(token=os.environ["TASKENGINE_WORKER_TOKEN"])
    worker = taskengine.Worker(client, queues=["sdk-bench"], concurrency=concurrency,
                               max_jobs=jobs, poll_wait=1.0)
    worker.register("sdk-noop", lambda ctx, payload: None)
    logging.basicConfig(level=logging.WARNING)
    began = time.monotonic()
    stats = worker.run()
    seconds = time.monotonic() - began
    if stats.completed != jobs:
        sys.exit(f"python: completed {stats.completed} of {jobs}: {stats}")
    print(f"python  {jobs} no-op jobs, concurrency {concurrency}: {seconds:.2f} s, "
          f"{jobs / seconds:.0f} jobs/s")


if __name__ == "__main__":
    main()
