# frozen_string_literal: true

# The example worker: sends each user's welcome SMS exactly once.
#
#   TASKENGINE_SERVER=http://127.0.0.1:8080 TASKENGINE_TOKEN=<worker token> ruby examples/worker.rb
#
# Leases executions of the queue "apps" (docs/clients.md shows the server's
# configuration); SIGTERM or Ctrl-C stops it gracefully.
require "digest"
require_relative "../lib/taskengine"

# A stand-in for an SMS gateway that deduplicates by a key: the message id.
def send_sms(phone, text, dedup_key:)
  puts "SMS to #{phone}: #{text}"
  $stdout.flush
  "sms-#{Digest::SHA256.hexdigest(dedup_key)[0, 12]}"
end

worker = Taskengine::Worker.new(queues: ["apps"], concurrency: 4)

worker.job("welcome-sms") do |ctx, payload|
  ctx.log("welcoming user #{payload['user']}")
  # idempotent: the gateway deduplicates by the effect key
  message_id = ctx.effect("send-sms", idempotent: true) do |key|
    send_sms(payload["phone"], "Welcome aboard!", dedup_key: key)
  end
  ctx.progress(100)
  { "message_id" => message_id }
end

p worker.run
