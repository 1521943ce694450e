# frozen_string_literal: true

# Throughput of one Ruby worker process on no-op jobs over HTTP.
#
#   ruby bench/noop_worker.rb JOBS CONCURRENCY
#
# Dispatches JOBS executions of sdk-noop (queue sdk-bench) in bulk with
# TASKENGINE_TOKEN, then runs one Worker (TASKENGINE_WORKER_TOKEN) until it has
# finished them and prints jobs/s. tests/clients/throughput.sh runs it.
require_relative "../lib/taskengine"

jobs, concurrency = ARGV.map(&:to_i)
admin = Taskengine::Client.new
(0...jobs).step(1000) { |start| admin.dispatch_bulk(Array.new([1000, jobs - start].min) { { job: "sdk-noop" } }) }
admin.close
client = Taskengine::Client.new(token: ENV.fetch("TASKENGINE_WORKER_TOKEN"))
worker = Taskengine::Worker.new(client: client, queues: ["sdk-bench"], concurrency: concurrency, max_jobs: jobs,
                                poll_wait: 1.0)
worker.job("sdk-noop") { nil }
began = Process.clock_gettime(Process::CLOCK_MONOTONIC)
stats = worker.run
seconds = Process.clock_gettime(Process::CLOCK_MONOTONIC) - began
abort "ruby: completed #{stats.completed} of #{jobs}: #{stats.to_h}" unless stats.completed == jobs
puts format("ruby    %d no-op jobs, concurrency %d: %.2f s, %.0f jobs/s", jobs, concurrency, seconds, jobs / seconds)
