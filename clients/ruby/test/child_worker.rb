# frozen_string_literal: true

# A worker process for the scenarios that kill or stop one.
#
#   child_worker.rb crash|stall|graceful EVENTS GO
#
# crash: runs sdk-crash; its effect's sink records "sink <key>" in EVENTS and
#        then hangs, so the test can kill the process between effect and commit.
# stall: runs sdk-stall; records "started <id>", waits for the file GO, then
#        logs a line; a lost claim records "stale" and stops the handler, else
#        it returns {"by" => "first"}.
# graceful: runs sdk-graceful; records "started <id>", blocks for a second and
#        returns {"finished" => true}.
# At SIGTERM it stops and prints its stats as JSON.
require "json"
require_relative "../lib/taskengine"

mode, events, go = ARGV
record = ->(line) { File.write(events, "#{line}\n", mode: "a") }

worker = Taskengine::Worker.new(queues: ["sdk-#{mode}"], concurrency: 1, poll_wait: 1.0)

worker.job("sdk-crash") do |ctx, _payload|
  ctx.effect("charge-card") do |key|
    record.call("sink #{key}")
    sleep 3600
  end
  { "charged" => true }
end

worker.job("sdk-stall") do |ctx, _payload|
  record.call("started #{ctx.id}")
  sleep 0.02 until File.exist?(go)
  begin
    ctx.log("the first worker resumes")
  rescue Taskengine::LeaseLost
    record.call("stale")
    raise
  end
  { "by" => "first" }
end

worker.job("sdk-graceful") do |ctx, _payload|
  record.call("started #{ctx.id}")
  sleep 1
  { "finished" => true }
end

puts JSON.generate(worker.run.to_h)
$stdout.flush
