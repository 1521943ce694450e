# frozen_string_literal: true

# The ActiveJob queue adapter (lib/taskengine/active_job.rb) against the live
# server: perform_later dispatches, a Worker runs the job with its effect,
# a scheduled job waits with run_at. Run by tests/clients/run.sh ruby.
require "minitest/autorun"
require_relative "harness"
require_relative "../lib/taskengine/active_job"

ActiveJob::Base.logger = Logger.new(IO::NULL)

class WelcomeSmsJob < ActiveJob::Base
  include Taskengine::ActiveJob::Context
  queue_as :mailers

  SENT = Queue.new

  def perform(user, phone)
    taskengine.log("welcoming user #{user}")
    taskengine.effect("send-sms") do |key|
      SENT << [user, phone, key]
      "sms-#{user}"
    end
  end
end

class ActiveJobTest < Minitest::Test
  def setup
    ActiveJob::Base.queue_adapter = ActiveJob::QueueAdapters::TaskengineAdapter.new(client: Harness.admin)
  end

  def test_perform_later_runs_in_a_worker_with_one_effect
    job = WelcomeSmsJob.perform_later(42, "+15550100")
    id = job.provider_job_id
    refute_nil id
    worker = Taskengine::Worker.new(client: Harness.client("TASKENGINE_TEST_WORKER_TOKEN"),
                                    queues: ["sdk-activejob"], poll_wait: 1.0, max_jobs: 1,
                                    logger: Logger.new(IO::NULL))
    Taskengine::ActiveJob.register(worker, "mailers")
    stats = worker.run(handle_signals: false)
    assert_equal 1, stats.completed
    execution = Harness.admin.wait(id, timeout: 20)
    assert_equal "succeeded", execution["status"], execution.to_json
    assert_equal "activejob-mailers", execution["job"]
    assert_equal "WelcomeSmsJob", execution["payload"]["job_class"]
    assert_equal "#{job.job_id}:0", execution["idempotency_key"]
    assert_equal [[42, "+15550100", "#{id}:send-sms"]], Array.new(WelcomeSmsJob::SENT.size) { WelcomeSmsJob::SENT.pop }
    assert_equal [["send-sms", "committed", "sms-42"]],
                 execution["effects"].map { |e| e.values_at("name", "state", "detail") }
    assert_includes execution["logs"].map { |l| l["message"] }, "welcoming user 42"
  end

  def test_set_wait_dispatches_with_run_at
    job = WelcomeSmsJob.set(wait: 3600).perform_later(7, "+15550107")
    execution = Harness.admin.get(job.provider_job_id)
    assert_equal "queued", execution["status"]
    assert_operator Time.parse(execution["run_at"]), :>, Time.now + 3500
    Harness.admin.cancel(job.provider_job_id, "a test job")
  end
end
