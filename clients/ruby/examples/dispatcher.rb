# frozen_string_literal: true

# The example dispatcher: asks for user 42's welcome SMS and waits for it.
#
#   TASKENGINE_SERVER=http://127.0.0.1:8080 TASKENGINE_TOKEN=<dispatch token> ruby examples/dispatcher.rb
#
# Running it twice sends one SMS: the idempotency key makes the second
# dispatch answer the first execution.
require_relative "../lib/taskengine"

client = Taskengine::Client.new
begin
  d = client.dispatch("welcome-sms", { "user" => 42, "phone" => "+15550100" }, idempotency_key: "welcome-42")
rescue Taskengine::IdempotencyConflict => e
  abort "welcome-42 was dispatched with another payload: execution #{e.existing_execution_id}"
end
puts "execution #{d.id} #{d.created? ? 'created' : 'already dispatched'}"
execution = client.wait(d.id, timeout: 60)
puts "execution #{d.id} #{execution['status']}"
p client.result(d.id) if execution["status"] == "succeeded"
client.close
