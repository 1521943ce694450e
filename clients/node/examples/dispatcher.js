// The example dispatcher: asks for user 42's welcome SMS and waits for it.
//
//   TASKENGINE_SERVER=http://127.0.0.1:8080 TASKENGINE_TOKEN=<dispatch token> node examples/dispatcher.js
//
// Running it twice sends one SMS: the idempotency key makes the second
// dispatch answer the first execution.
import {Client, IdempotencyConflict} from '../index.js';

const client = new Client();
try {
  const d = await client.dispatch('welcome-sms', {user: 42, phone: '+15550100'},
                                  {idempotencyKey: 'welcome-42'});
  console.log(`execution ${d.id} ${d.created ? 'created' : 'already dispatched'}`);
  const execution = await client.wait(d.id, {timeoutMs: 60000});
  console.log(`execution ${d.id} ${execution.status}`);
  if (execution.status === 'succeeded') console.log(await client.result(d.id));
} catch (e) {
  if (!(e instanceof IdempotencyConflict)) throw e;
  console.error(`welcome-42 was dispatched with another payload: execution ${e.existingExecutionId}`);
  process.exitCode = 1;
} finally {
  client.close();
}
