"""The example worker: sends each user's welcome SMS exactly once.

    TASKENGINE_SERVER=http://127.0.0.1:8080 TASKENGINE_TOKEN=<worker token> \
        python3 examples/worker.py

Leases executions of the queue "apps" (docs/clients.md shows the server's
configuration); SIGTERM or Ctrl-C stops it gracefully.
"""

import hashlib
import logging
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import taskengine  # noqa: E402

worker = taskengine.Worker(queues=["apps"], concurrency=4)


def send_sms(phone: str, text: str, dedup_key: str) -> str:
    """A stand-in for an SMS gateway that deduplicates by a key: the message id."""
    print(f"SMS to {phone}: {text}", flush=True)
    return "sms-" + hashlib.sha256(dedup_key.encode()).hexdigest()[:12]


@worker.job("welcome-sms")
def welcome_sms(ctx: taskengine.JobContext, payload: dict) -> dict:
    ctx.log(f"welcoming user {payload['user']}")
    message_id = ctx.effect(
        "send-sms",
        lambda key: send_sms(payload["phone"], "Welcome aboard!", dedup_key=key),
        idempotent=True)  # the gateway deduplicates by the effect key
    ctx.progress(100)
    return {"message_id": message_id}


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    print(worker.run())
