"""The example dispatcher: asks for user 42's welcome SMS and waits for it.

    TASKENGINE_SERVER=http://127.0.0.1:8080 TASKENGINE_TOKEN=<dispatch token> \
        python3 examples/dispatcher.py

Running it twice sends one SMS: the idempotency key makes the second
dispatch answer the first execution.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import taskengine  # noqa: E402

with taskengine.Client() as client:
    try:
        d = client.dispatch("welcome-sms", {"user": 42, "phone": "+15550100"},
                            idempotency_key="welcome-42")
    except taskengine.IdempotencyConflict as e:
        sys.exit(f"welcome-42 was dispatched with another payload: execution "
                 f"{e.existing_execution_id}")
    print(f"execution {d.id} {'created' if d.created else 'already dispatched'}")
    execution = client.wait(d.id, timeout=60)
    print(f"execution {d.id} {execution['status']}")
    if execution["status"] == "succeeded":
        print(client.result(d.id))
